"""The update lane: changes to messages already posted (the parent's live status, a decided
review, the thread's agent session status, bot.jobs.delivery.sessions) travel in a lane of
their own, so a review request never waits on a status update, and go at most every
`status_interval_s`, coalesced to the newest. While the plan streams, the parent's live status
is not sent (the summary at the end is). An update whose parent was deleted moves the thread
(bot.jobs.delivery.threads).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlmodel import Session

from bot.jobs.delivery.outcomes import THREAD_GONE, Outcomes
from bot.jobs.delivery.pace import Pace
from bot.jobs.delivery.sessions import AgentSessions
from bot.jobs.delivery.threads import ThreadMoves
from bot.messages import kit
from bot.messages.owed import ASSISTANT_STATUS
from bot.messages.sessions import SESSION_STATUS
from bot.slackweb.errors import PostError
from bot.slackweb.poster import SlackPoster
from bot.store import outbox_claims, outbox_stream
from bot.store.debate_tables import Debate
from bot.store.outbox import PARENT, PARENT_UPDATE, SHOWN_IN_STREAM
from bot.store.outbox_tables import Outbox, OutboxState

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class UpdateLane:
    """Sends a debate's due updates, each to every copy of the message it changes."""

    outcomes: Outcomes
    poster: SlackPoster
    threads: ThreadMoves
    sessions: AgentSessions
    pace: Pace = field(init=False)

    def __post_init__(self) -> None:
        self.pace = Pace(self.outcomes.config.status_interval_s)

    async def send_due(self, debate_id: int) -> None:
        # Rows written while this lane waits coalesce, so the newest status goes out.
        await self.pace.wait(debate_id)
        owner, claim_s = self.outcomes.owner, self.outcomes.config.claim_s

        def claim(s: Session) -> tuple[list[tuple[Outbox, Outbox | None]], bool]:
            claimed = outbox_claims.claim_updates(
                s, debate_id=debate_id, owner=owner, claim_s=claim_s
            )
            # Asked after the claim: a summary claimed here was committed with the ending.
            return claimed, outbox_stream.progress_streamed(s, debate_id=debate_id)

        claimed, streamed = await self.outcomes.db(claim)
        for row, target in claimed:
            if streamed and row.key == PARENT_UPDATE:
                # The streamed plan shows the progress: one write fewer in the channel.
                await self.outcomes.sent(row, [], SHOWN_IN_STREAM)
                continue
            await self._update(row, target)
        if claimed:
            self.pace.wrote(debate_id)

    async def _update(self, row: Outbox, target: Outbox | None) -> None:
        if target is None or target.state in (OutboxState.FAILED, OutboxState.SPLIT):
            await self.outcomes.fail(
                row, f"the message it changes ({row.target_key}) was never posted"
            )
            return
        if not target.deliveries:
            await self.outcomes.retry_quietly(row)
            return
        if row.key in (SESSION_STATUS, ASSISTANT_STATUS):
            debate = await self.outcomes.db(lambda s: s.get(Debate, row.debate_id))
            assert debate is not None
            await self.sessions.send(row, debate)
            return
        message = kit.Message(row.text, row.blocks)
        if target.key.startswith(f"{PARENT}:"):
            # A re-posted parent keeps its note about the deleted original through updates.
            message = kit.Message(message.text, [*message.blocks, target.blocks[-1]])
        for channel, ts in target.deliveries:
            try:
                await self.poster.update(channel=channel, ts=ts, message=message, attempts=1)
            except PostError as error:
                code = await self.outcomes.answered(row, error)
                if code is None:
                    return
                if code in THREAD_GONE and (row.target_key or "").startswith(PARENT):
                    debate = await self.outcomes.db(lambda s: s.get(Debate, row.debate_id))
                    assert debate is not None
                    await self.threads.move(row, debate, code)
                    return
                if len(target.deliveries) == 1:
                    await self.outcomes.give_up(row, code)
                    return
                log.warning("debate %s: update of one copy failed: %s", row.debate_id, error)
        await self.outcomes.sent(row, [], "updated")
