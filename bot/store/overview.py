"""What App Home lists: recent debates in the viewer's channels, and how each protocol's
verdicts were received; and what each protocol's debates typically cost here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, true
from sqlmodel import Session, col, select

from bot.store.debate_tables import Debate, DebateState, TriageState
from bot.store.review_tables import Escalation, Feedback


def recent_debates(session: Session, *, channel_ids: list[str], limit: int = 10) -> list[Debate]:
    if not channel_ids:
        return []
    return list(
        session.exec(
            select(Debate)
            .where(col(Debate.channel_id).in_(channel_ids))
            .order_by(col(Debate.id).desc())
            .limit(limit)
        )
    )


@dataclass(frozen=True)
class ProtocolStats:
    """How one protocol is doing: debates, how they ended, and what people thought."""

    protocol: str
    debates: int
    finished: int
    escalated: int
    answered_without_debate: int
    positive: int
    negative: int


def protocol_stats(
    session: Session, *, since: datetime | None = None, channel_id: str | None = None
) -> list[ProtocolStats]:
    """Per-protocol counts of the debates started since `since` (in one channel), read by
    `debatebot stats` and App Home."""
    per_protocol = select(Debate.protocol, func.count()).group_by(col(Debate.protocol))
    if since is not None:
        per_protocol = per_protocol.where(col(Debate.created_at) >= since)
    if channel_id is not None:
        per_protocol = per_protocol.where(col(Debate.channel_id) == channel_id)

    def counted(query: Any) -> dict[str, int]:
        return {protocol: count for protocol, count in session.exec(query)}

    debates = counted(per_protocol)
    finished = counted(per_protocol.where(Debate.state == DebateState.FINISHED))
    escalated = counted(
        per_protocol.join(Escalation, col(Escalation.debate_id) == col(Debate.id)).where(
            col(Escalation.sample).is_(False)
        )
    )
    answered = counted(per_protocol.where(Debate.triage == TriageState.ANSWERED))
    votes: dict[tuple[str, str], int] = {
        (protocol, value): count
        for protocol, value, count in session.exec(
            select(Debate.protocol, Feedback.value, func.count())
            .join(Feedback, col(Feedback.debate_id) == col(Debate.id))
            .where(
                col(Debate.created_at) >= since if since is not None else true(),
                col(Debate.channel_id) == channel_id if channel_id is not None else true(),
            )
            .group_by(col(Debate.protocol), col(Feedback.value))
        )
    }
    return [
        ProtocolStats(
            protocol=protocol,
            debates=count,
            finished=finished.get(protocol, 0),
            escalated=escalated.get(protocol, 0),
            answered_without_debate=answered.get(protocol, 0),
            positive=votes.get((protocol, "positive"), 0),
            negative=votes.get((protocol, "negative"), 0),
        )
        for protocol, count in sorted(debates.items())
    ]


def source_counts(
    session: Session, *, since: datetime | None = None, channel_id: str | None = None
) -> dict[str, int]:
    """How many debates each source started since `since` (in one channel): Slack's triggers,
    the CLI, agents over MCP."""
    query = select(Debate.source, func.count()).group_by(col(Debate.source))
    if since is not None:
        query = query.where(col(Debate.created_at) >= since)
    if channel_id is not None:
        query = query.where(col(Debate.channel_id) == channel_id)
    return {str(source): count for source, count in sorted(session.exec(query))}


def typical_costs(
    session: Session, *, protocols: Sequence[str], last: int = 50
) -> dict[str, tuple[float, int]]:
    """For each of `protocols` with a finished debate here: the median cost of its last `last`
    finished debates and how many that median is of (what `list_protocols` tells an agent a
    debate typically costs with the models this deployment runs)."""
    found: dict[str, tuple[float, int]] = {}
    for protocol in protocols:
        costs = list(
            session.exec(
                select(Debate.cost_usd)
                .where(Debate.protocol == protocol, Debate.state == DebateState.FINISHED)
                .order_by(col(Debate.id).desc())
                .limit(last)
            )
        )
        if costs:
            found[protocol] = (statistics.median(costs), len(costs))
    return found
