"""Repository functions for the Slack surface: channel settings, the message ledger, escalations,
reviews, forked debates and the App Home queries. Keyword-only, one unit of work each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, true, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store import outbox
from bot.store.audit import GENESIS_HASH, turn_digest
from bot.store.repository import get_debate, turn_rows
from bot.store.tables import (
    ChannelSettings,
    Debate,
    DebateSource,
    Escalation,
    EscalationState,
    Feedback,
    FeedbackValue,
    Outbox,
    OutboxState,
    ProcessedTrigger,
    Review,
    TriageState,
    Turn,
)
from engine.models import DebateSpec, utcnow

CHANNEL_SETTING_FIELDS = (
    "protocol",
    "rounds",
    "threshold",
    "reviewers",
    "owners",
    "budget_usd",
    "adr_watch",
    "trigger_reaction",
    "triage",
    "route",
    "monthly_budget_usd",
    "review_sla_h",
    "digest_time",
    "timezone",
    "adr_pattern",
    "pr_comment",
)


def channel_settings(session: Session, *, channel_id: str) -> ChannelSettings:
    """The channel's stored settings, or the defaults (not stored) when it has none."""
    stored = session.get(ChannelSettings, channel_id)
    return stored if stored is not None else ChannelSettings(channel_id=channel_id)


def save_channel_settings(
    session: Session, *, channel_id: str, updated_by: str, values: dict[str, Any]
) -> ChannelSettings:
    """Create or update the channel's settings with `values` (only known fields)."""
    unknown = set(values) - set(CHANNEL_SETTING_FIELDS)
    if unknown:
        raise ValueError(f"unknown channel settings: {', '.join(sorted(unknown))}")
    row = session.get(ChannelSettings, channel_id) or ChannelSettings(channel_id=channel_id)
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_by = updated_by
    row.updated_at = utcnow()
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def was_processed(session: Session, *, key: str) -> bool:
    return session.get(ProcessedTrigger, key) is not None


def mark_processed(session: Session, *, key: str, debate_id: int | None = None) -> bool:
    """Remember a Slack event id (or other trigger key); False when it was seen before."""
    session.add(ProcessedTrigger(key=key, debate_id=debate_id))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def open_window(session: Session, *, key: str, window_s: float) -> bool:
    """True unless `key` was opened within the last `window_s` seconds (a double click)."""
    now = utcnow()
    session.add(ProcessedTrigger(key=key, created_at=now))
    try:
        session.commit()
        return True
    except IntegrityError:
        session.rollback()
    reopened = session.execute(
        update(ProcessedTrigger)
        .where(
            col(ProcessedTrigger.key) == key,
            col(ProcessedTrigger.created_at) < now - timedelta(seconds=window_s),
        )
        .values(created_at=now)
    )
    session.commit()
    return bool(reopened.rowcount)  # type: ignore[attr-defined]


def get_escalation(session: Session, *, escalation_id: int) -> Escalation | None:
    return session.get(Escalation, escalation_id)


def review_of(session: Session, *, escalation_id: int) -> Review | None:
    return session.exec(select(Review).where(Review.escalation_id == escalation_id)).one_or_none()


ReviewMessages = Callable[[Review, Debate], list[outbox.Draft]]


def record_review(
    session: Session,
    *,
    escalation_id: int,
    reviewer: str,
    decision: EscalationState,
    note: str | None,
    messages: ReviewMessages | None = None,
) -> tuple[Review, bool]:
    """Store the one decision on an escalation, with the messages it owes (the review request
    shown decided); a second click returns the first decision (created=False)."""
    escalation = session.get(Escalation, escalation_id)
    assert escalation is not None
    review = Review(
        escalation_id=escalation_id,
        debate_id=escalation.debate_id,
        reviewer=reviewer,
        decision=decision,
        note=note or None,
    )
    escalation.state = decision
    session.add(escalation)

    session.add(review)
    try:
        session.flush()
        debate = get_debate(session, debate_id=escalation.debate_id)
        if debate.link:
            debate.pr_comment_due = utcnow()
            session.add(debate)
        if messages is not None:
            outbox.stage(session, debate=debate, drafts=messages(review, debate))
        session.commit()
    except IntegrityError:
        session.rollback()
        existing = review_of(session, escalation_id=escalation_id)
        assert existing is not None
        return existing, False
    session.refresh(review)
    return review, True


def fork_debate(
    session: Session, *, debate_id: int, trigger_key: str, spec: DebateSpec
) -> tuple[Debate, bool]:
    """A follow-up debate that carries the original's turns and thread messages forward.

    The turns are copied (re-chained under the new debate), so the engine replays them instead of
    asking a model again; the delivered parent and round messages are shared, so nothing is
    re-posted and the status updates land on the same parent.
    """
    existing = session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one_or_none()
    if existing is not None:
        return existing, False
    original = get_debate(session, debate_id=debate_id)
    fork = Debate(
        trigger_key=trigger_key,
        source=DebateSource.ANOTHER_ROUND,
        channel_id=original.channel_id,
        thread_ts=original.thread_ts,
        requested_by=original.requested_by,
        parent_debate_id=original.id,
        question=spec.question,
        protocol=spec.protocol,
        spec_json=spec.model_dump_json(),
    )
    session.add(fork)
    try:
        session.flush()
        assert fork.id is not None
        prev = GENESIS_HASH
        for row in turn_rows(session, debate_id=debate_id):
            fields = row.model_dump(exclude={"id", "debate_id", "prev_hash", "hash"})
            copy = Turn(**fields, debate_id=fork.id, prev_hash=prev, hash="")
            copy.hash = turn_digest(copy, prev)
            prev = copy.hash
            session.add(copy)
        for owed in outbox.rows_of(session, debate_id=debate_id):
            carried = owed.key.startswith((outbox.PARENT, "round:")) and owed.action == "post"
            if carried and owed.state == OutboxState.SENT:
                fields = owed.model_dump(exclude={"id", "debate_id"})
                session.add(Outbox(**fields, debate_id=fork.id))
        session.commit()
    except IntegrityError:
        session.rollback()
        return session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one(), False
    session.refresh(fork)
    return fork, True


def open_escalations(session: Session) -> list[tuple[Escalation, Debate]]:
    """Every escalation of a Slack debate still waiting for a reviewer, oldest first."""
    rows = session.exec(
        select(Escalation, Debate)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .where(Escalation.state == EscalationState.OPEN, col(Debate.channel_id).is_not(None))
        .order_by(col(Escalation.created_at))
    )
    return [(escalation, debate) for escalation, debate in rows]


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


# --- feedback on verdicts ------------------------------------------------------------------------


def record_feedback(
    session: Session, *, debate_id: int, user_id: str, value: FeedbackValue
) -> tuple[Feedback, bool]:
    """Store one person's thumbs up or down on a debate; a second click overwrites their row.
    Returns the row and whether it changed anything."""
    for _ in range(2):
        row = session.exec(
            select(Feedback).where(Feedback.debate_id == debate_id, Feedback.user_id == user_id)
        ).one_or_none()
        if row is not None:
            changed = row.value != value
            row.value, row.updated_at = value, utcnow()
            session.add(row)
            session.commit()
            return row, changed
        row = Feedback(debate_id=debate_id, user_id=user_id, value=value)
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            # The same person's other click won the insert; update that row instead.
            session.rollback()
            continue
        return row, True
    raise AssertionError("a feedback row neither existed nor could be inserted")


def feedback_counts(session: Session, *, debate_ids: list[int]) -> dict[int, dict[str, int]]:
    """Thumbs up and down per debate: {debate_id: {"positive": n, "negative": m}}."""
    if not debate_ids:
        return {}
    counts: dict[int, dict[str, int]] = {d: {v: 0 for v in FeedbackValue} for d in debate_ids}
    rows = session.exec(
        select(Feedback.debate_id, Feedback.value, func.count())
        .where(col(Feedback.debate_id).in_(debate_ids))
        .group_by(col(Feedback.debate_id), col(Feedback.value))
    )
    for debate_id, value, count in rows:
        counts[debate_id][value] = count
    return counts


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
    finished = counted(per_protocol.where(Debate.state == "finished"))
    escalated = counted(per_protocol.join(Escalation, col(Escalation.debate_id) == col(Debate.id)))
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
