"""The plan lane: a debate's plan is streamed into its thread in a lane of its own, started once
the parent is there, then carried on (bot.jobs.delivery.open_stream) at most every
`stream_interval_s`. A stream Slack will not start falls back to the parent's live status; a
start whose answer was lost is looked for before a second one is started.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bot.jobs.delivery.open_stream import OpenStream
from bot.jobs.delivery.outcomes import METHOD_ABSENT, THREAD_GONE, Outcomes
from bot.jobs.delivery.pace import Pace
from bot.jobs.delivery.threads import ThreadMoves
from bot.messages import plan
from bot.slackweb.errors import PostError, TokenRefusedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.store import outbox_stream
from bot.store.debate_tables import Debate
from bot.store.outbox_stream import ClaimedStream
from bot.store.outbox_tables import Outbox, OutboxState, StreamState

log = logging.getLogger(__name__)

TURN_LEAD = 0.25
"""The share of the pace the lane wakes early by, to be waiting when the channel frees (the
channel's own pace, `SlackPoster`, still spaces the writes)."""
PEOPLE = ("U", "W")
"""The ids a stream's recipient may have: a person (`U…`, or `W…` in an organization)."""


@dataclass(kw_only=True)
class PlanStream:
    """Delivers a debate's stream row: starts the stream, or hands it to `open`."""

    outcomes: Outcomes
    poster: SlackPoster
    directory: SlackDirectory
    threads: ThreadMoves
    open: OpenStream
    pace: Pace = field(init=False)
    no_streaming: str | None = field(default=None, init=False)
    """Slack's answer when it has no streaming here: no later debate asks for a stream."""

    def __post_init__(self) -> None:
        self.pace = Pace(self.outcomes.config.stream_interval_s)

    async def next_stream(self, debate_id: int) -> bool:
        """Deliver the debate's stream row if it is due; True when it is due again at once.

        The lane waits out its pace a little early (`TURN_LEAD`) and then for the channel's
        turn, urgent when the plan shows a turn's first words Slack has not, so they take the
        channel's next write rather than wait behind the writes queued there; the row is
        claimed in that turn, so every version written while the lane waited goes in one
        append."""
        await self.pace.wait(debate_id, early_s=self.pace.interval_s * TURN_LEAD)
        owed = await self.outcomes.db(lambda s: outbox_stream.due_stream(s, debate_id=debate_id))
        if owed is None:
            return False
        shown = plan.StreamContent.of_row(owed.text, owed.blocks)
        urgent = plan.first_words(owed.streamed or [], shown.chunks)
        owner, claim_s = self.outcomes.owner, self.outcomes.config.claim_s
        # The channel the plan's writes go to: its message's, once Slack has answered with it.
        channel = owed.deliveries[0][0] if owed.deliveries else owed.channel_id
        async with self.poster.turn(channel, urgent=urgent):
            claimed = await self.outcomes.db(
                lambda s: outbox_stream.claim_stream(
                    s, debate_id=debate_id, owner=owner, claim_s=claim_s
                )
            )
            if claimed is None:
                return False
            self.pace.wrote(debate_id)
            async with self.outcomes.handed_back_if_cancelled(claimed.row):
                return await self._stream(claimed)

    async def _stream(self, claimed: ClaimedStream) -> bool:
        row, debate, parent = claimed.row, claimed.debate, claimed.parent
        content = plan.StreamContent.of_row(row.text, row.blocks)
        moved = row.stream_thread_ts not in (None, debate.thread_ts)
        if row.stream_state in (StreamState.OPEN, StreamState.MESSAGE) and moved:
            # The debate's parent was posted again: the plan follows it to the new thread.
            await self.open.leave_thread(row)
            row.stream_state, row.streamed, row.deliveries = None, [], []
        if row.stream_state == StreamState.MESSAGE:
            return await self.open.as_message(row, debate, content, row.ts)
        if row.stream_state == StreamState.OPEN:
            return await self.open.go_on(row, debate, content)
        if parent is not None and parent.state in (OutboxState.PENDING, OutboxState.SENDING):
            # "Streamed messages should always be replies": it starts once the parent is there.
            await self.outcomes.retry_quietly(row)
            return False
        return await self._start(row, debate, content)

    async def _start(self, row: Outbox, debate: Debate, content: plan.StreamContent) -> bool:
        """Start the debate's stream in its thread, or fall back to the parent's status."""
        if self.no_streaming is not None:
            return await self._refuse(row, self.no_streaming)
        if debate.halt_reason is not None:
            await self.outcomes.fail(row, f"thread unreachable: {debate.halt_reason}")
            return False
        if debate.thread_ts is None:
            return await self._refuse(row, "the debate's thread was never posted")
        recipient = debate.requested_by or ""
        if not recipient.startswith(PEOPLE):
            # recipient_user_id "Required when streaming to channels"; a stream goes to a
            # person, and a debate asked for by an app or a workflow has none.
            return await self._refuse(row, "no person to stream to")
        try:
            team = await self.directory.recipient_team()
        except PostError as error:
            await self.outcomes.retry(row, error)
            return False
        if team is None:
            # recipient_team_id, "Required when streaming to channels".
            return await self._refuse(row, "no team to stream to")
        if row.stream_state == StreamState.STARTING:
            adopted = await self._adopt(row, debate, content)
            if adopted is not None:
                return adopted
        row_id, owner = row.id or 0, self.outcomes.owner
        await self.outcomes.db(
            lambda s: outbox_stream.stream_starting(s, row_id=row_id, owner=owner)
        )
        try:
            posted = await self.poster.start_stream(
                channel=row.channel_id,
                thread_ts=debate.thread_ts,
                chunks=content.chunks,
                recipient_user_id=recipient,
                recipient_team_id=team,
                attempts=1,
            )
        except TokenRefusedError as refused:
            if refused.code != "missing_scope":
                raise
            # A scope only streaming needs: no reason to stop every other message.
            return await self._refuse(row, f"missing_scope {refused.needed or ''}".strip())
        except PostError as error:
            # Retried, the start may have reached Slack all the same: the next try looks first.
            code = await self.open.refused(row, error)
            if code is None:
                return False
            if code in THREAD_GONE:
                # As for a post: the parent is posted again (once, whichever lane finds the
                # thread gone first), and the stream starts in the new thread.
                return await self.threads.move(row, debate, code)
            if code in METHOD_ABSENT:
                self.no_streaming = code
            return await self._refuse(row, code)
        await self.open.streamed(
            row,
            content.chunks,
            StreamState.OPEN,
            deliveries=[[posted.channel, posted.ts]],
            thread_ts=debate.thread_ts,
            more=content.final,
        )
        return content.final

    async def _adopt(self, row: Outbox, debate: Debate, content: plan.StreamContent) -> bool | None:
        """A start whose answer never came back may have opened a stream in the thread. The
        bot's replies there that no outbox row knows are tried, newest first, with the whole
        plan appended (a `task_update` replaces its task, so sending one twice changes
        nothing): one that takes it is that stream, continued from here. None when there is
        none (a new stream is started); False when the row waits for a retry."""
        assert debate.id is not None
        assert debate.thread_ts is not None
        debate_id, channel, thread_ts = debate.id, row.channel_id, debate.thread_ts
        try:
            found = await self.directory.bot_messages(channel, thread_ts=thread_ts)
        except PostError as error:
            if await self.outcomes.retried(row, error):
                return False
            log.warning("debate %s: cannot look for a stream already started: %s", debate_id, error)
            return None
        known = await self.outcomes.db(
            lambda s: outbox_stream.delivered_ts(s, channel_id=channel, thread_ts=thread_ts)
        )
        for ts in reversed([ts for ts, _ in found.messages if ts not in known]):
            try:
                await self.poster.append_stream(
                    channel=channel, ts=ts, chunks=content.chunks, attempts=1
                )
            except TokenRefusedError as refused:
                if refused.code != "missing_scope":
                    raise
                return None  # the start is refused the same way, and falls back
            except PostError as error:
                if await self.outcomes.retried(row, error):
                    return False
                continue  # not a stream in progress (a message, or a stream already closed)
            log.info("debate %s: the stream started before (%s) is continued", debate_id, ts)
            await self.open.streamed(
                row,
                content.chunks,
                StreamState.OPEN,
                deliveries=[[channel, ts]],
                thread_ts=thread_ts,
                more=content.final,
            )
            return content.final
        return None

    async def _refuse(self, row: Outbox, code: str) -> bool:
        """Slack will not stream here: the parent's live status shows the progress instead."""
        log.info(
            "debate %s: no streamed plan (%s); the parent shows the status", row.debate_id, code
        )
        owner = self.outcomes.owner
        await self.outcomes.db(
            lambda s: outbox_stream.refuse_stream(
                s, row_id=row.id or 0, owner=owner, error=f"stream refused: {code}"
            )
        )
        self.outcomes.wake()
        return False
