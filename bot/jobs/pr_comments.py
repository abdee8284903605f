"""The verdict of a debate whose ADR came from a pull (merge) request, posted there as one
comment linking the Slack thread, and updated when a reviewer decides. Opt-in per channel
(`/debate config set pr_comment on`).

The comment carries a marker naming the debate (`bot.hosts.comments.upsert_comment`), so a retried
ending, a resumed run or a second worker updates the one comment and never adds another.

The ending and a review mark the debate's comment due (`Debate.pr_comment_due`) in their own
transaction; a sync clears the mark. A comment the host could not take now (down, failing,
rate-limited) stays due and the scheduled `pr-comments` job syncs it again, for a day; one the
host refuses for good (no access to the repository, a revoked token) is logged and cleared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session

from bot.hosts.clients import HostClients
from bot.hosts.comments import upsert_comment
from bot.hosts.links import LinkError, parse_link
from bot.store import channels, endings, operations, queue, reviews
from bot.store.db import in_session
from bot.store.debate_tables import Debate, VerdictRecord
from bot.store.errors import StoreError
from bot.store.results import StoredResult
from bot.store.review_tables import Review
from bot.store.tenancy import EVERY_WORKSPACE, owner_of
from engine.models import DebateResult

log = logging.getLogger(__name__)
MAX_SYNTHESIS_CHARS = 1500


def thread_url(channel: str, ts: str) -> str:
    """Slack's link to a message, which opens it in whichever workspace holds the channel."""
    return f"https://slack.com/archives/{channel}/p{ts.replace('.', '')}"


def comment_body(debate: Debate, verdict: VerdictRecord, review: Review | None) -> str:
    """What the pull request reads: the verdict, why, what is open, who decided, the thread."""
    result = StoredResult.read(verdict.result_json)
    synthesis = verdict.synthesis
    if len(synthesis) > MAX_SYNTHESIS_CHARS:
        synthesis = synthesis[: MAX_SYNTHESIS_CHARS - 1].rstrip() + "…"
    escalated = ", sent to human review" if verdict.escalate else ""
    lines = [
        f"**debatebot verdict: {verdict.decision}** (confidence {verdict.confidence:.2f},"
        f" {verdict.level}{escalated})",
        "",
        synthesis,
    ]
    unresolved = result.verdict.unresolved_points
    if unresolved:
        lines += ["", "Unresolved:", *(f"- {point}" for point in unresolved[:8])]
    if review is not None:
        note = f": {review.note}" if review.note else ""
        lines += ["", f"**Review: {review.decision.replace('_', ' ')}** by a reviewer{note}"]
    elif verdict.escalate:
        lines += ["", "Waiting for a human review in Slack."]
    where = (
        f"[the Slack thread]({thread_url(debate.channel_id, debate.thread_ts)})"
        if debate.channel_id and debate.thread_ts
        else "Slack"
    )
    lines += ["", f"Debate #{debate.id} · {debate.protocol} · see {where}"]
    return "\n".join(lines)


class PullRequestComments:
    """Keeps each linked pull request's verdict comment up to date."""

    def __init__(self, engine: Engine, clients: HostClients) -> None:
        self.engine = engine
        self.clients = clients

    async def after_finish(self, debate: Debate, _result: DebateResult) -> None:
        if debate.link:
            await self.sync(debate.id or 0)

    async def after_review(self, debate: Debate, _review: Review) -> None:
        if debate.link:
            await self.sync(debate.id or 0)

    async def sync(self, debate_id: int) -> str | None:
        """Post or update the comment and clear the debate's due mark; the comment's id, or
        None when none is wanted (no pull request link, the channel's switch off) or the host
        refused (logged, and the debate stays due for the `pr-comments` job)."""
        try:
            # Its channel's settings are its workspace's: read in that workspace.
            debate = await in_session(
                self.engine,
                lambda s: queue.get_debate(s, debate_id=debate_id),
                workspace=EVERY_WORKSPACE,
            )
            owed = await in_session(
                self.engine, lambda s: _load(s, debate_id), workspace=owner_of(debate)
            )
        except StoreError as error:
            log.warning("debate %s: pull request comment not synced: %s", debate_id, error)
            return None
        comment_id = None
        if owed.comment is not None:
            debate, verdict, review = owed.comment
            try:
                link = parse_link(debate.link or "", self.clients.config)
                if link is not None and link.kind == "pull":
                    comment_id = await upsert_comment(
                        link,
                        self.clients,
                        debate_id=debate_id,
                        body=comment_body(debate, verdict, review),
                    )
            except LinkError as error:
                if error.transient:
                    log.warning(
                        "debate %s: no comment on %s yet (%s); the pr-comments job retries",
                        debate_id,
                        debate.link,
                        error,
                    )
                    return None
                log.error(
                    "debate %s: no comment on %s, and none will be retried: %s",
                    debate_id,
                    debate.link,
                    error,
                )
        seen = owed.due
        if seen is not None:
            try:
                await in_session(
                    self.engine,
                    lambda s: operations.pr_comment_synced(s, debate_id=debate_id, seen=seen),
                    workspace=EVERY_WORKSPACE,
                )
            except StoreError as error:
                # Still due, so synced once more later: the marker makes that an update.
                log.warning("debate %s: comment synced, mark not cleared: %s", debate_id, error)
        return comment_id


@dataclass(frozen=True)
class _Owed:
    due: datetime | None
    comment: tuple[Debate, VerdictRecord, Review | None] | None
    """What to post; None when no comment is wanted."""


def _load(session: Session, debate_id: int) -> _Owed:
    debate = queue.get_debate(session, debate_id=debate_id)
    due = debate.pr_comment_due
    if not debate.link or not debate.channel_id:
        return _Owed(due, None)
    if not channels.channel_settings(session, channel_id=debate.channel_id).pr_comment:
        return _Owed(due, None)
    verdict = endings.verdict_for(session, debate_id=debate_id)
    if verdict is None:
        return _Owed(due, None)
    escalation = reviews.escalation_for(session, debate_id=debate_id)
    review = (
        reviews.review_of(session, escalation_id=escalation.id)
        if escalation is not None and escalation.id is not None
        else None
    )
    return _Owed(due, (debate, verdict, review))
