"""A plan stream once started: each newer version appended as what changed, the final one
stopping it, and what Slack has of it recorded. One that cannot be continued (Slack closed it,
it was deleted, a method was refused) becomes a normal message with the same content, which
later versions change; one left behind in a thread the debate moved from is stopped and deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.jobs.delivery.outcomes import (
    STILL_STREAMING,
    STREAM_CLOSED,
    STREAM_GONE,
    UNREACHABLE,
    Outcomes,
)
from bot.jobs.delivery.threads import ThreadMoves
from bot.messages import plan
from bot.slackweb.errors import PostError, TokenRefusedError, UnthreadedError
from bot.slackweb.poster import SlackPoster
from bot.store import outbox_stream
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox, StreamState

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class OpenStream:
    """Writes to a debate's started stream, or to the message that stands in for it."""

    outcomes: Outcomes
    poster: SlackPoster
    threads: ThreadMoves

    async def refused(self, row: Outbox, error: PostError) -> str | None:
        """A failed stream write after the ladder's first rung (`Outcomes.answered`), and a
        lost channel given up here (the post lane finds it gone too, and halts the debate):
        None when the row is settled, else the code for the caller's own rungs."""
        code = await self.outcomes.answered(row, error)
        if code is not None and code in UNREACHABLE:
            await self.outcomes.refuse(row, code)
            return None
        return code

    async def go_on(self, row: Outbox, debate: Debate, content: plan.StreamContent) -> bool:
        """Append what changed, or stop with the final version. A stream that cannot take it
        becomes a normal message with the same content."""
        channel, ts = row.deliveries[0] if row.deliveries else (row.channel_id, "")
        sent = row.streamed
        chunks = (
            plan.closing_chunks(sent, content)
            if content.final
            else plan.delta(sent, content.chunks)
        )
        try:
            if content.final:
                await self.poster.stop_stream(
                    channel=channel, ts=ts, chunks=chunks, blocks=content.closing, attempts=1
                )
            elif chunks:
                await self.poster.append_stream(channel=channel, ts=ts, chunks=chunks, attempts=1)
        except TokenRefusedError as refused:
            if refused.code != "missing_scope":
                raise
            await self.abandon(channel, ts, refused.code)
            return await self.as_message(row, debate, content, ts)
        except PostError as error:
            # Retried from what Slack is known to have: a task it took twice is the same.
            code = await self.refused(row, error)
            if code is None:
                return False
            if code in STREAM_GONE:
                return await self.as_message(row, debate, content, None)
            if code not in STREAM_CLOSED:
                # Any other refusal of an append or a stop: end the stream as it stands, then
                # show the plan as a message in its place.
                await self.abandon(channel, ts, code)
            return await self.as_message(row, debate, content, ts)
        state = StreamState.CLOSED if content.final else StreamState.OPEN
        await self.streamed(row, plan.merged(sent, chunks), state)
        return False

    async def leave_thread(self, row: Outbox) -> None:
        """Stop the plan's message in a thread the debate has left, and delete it: the whole
        plan starts again in the new thread (if Slack will not delete it, it is left stopped)."""
        if not row.deliveries:
            return
        channel, ts = row.deliveries[0]
        if row.stream_state == StreamState.OPEN:
            await self.abandon(channel, ts, "thread moved")
        try:
            await self.poster.delete(channel=channel, ts=ts)
        except (PostError, TokenRefusedError) as error:
            log.warning("debate %s: the plan left in %s stays: %s", row.debate_id, ts, error)

    async def abandon(self, channel: str, ts: str, code: str) -> None:
        """Stop a stream that was refused more, so it is not left streaming (best effort: a
        token Slack refuses is found out again by the message that follows)."""
        try:
            await self.poster.stop_stream(channel=channel, ts=ts, attempts=1)
        except (PostError, TokenRefusedError) as error:
            log.info("stream %s in %s not stopped after %s: %s", ts, channel, code, error)

    async def as_message(
        self, row: Outbox, debate: Debate, content: plan.StreamContent, ts: str | None
    ) -> bool:
        """The plan as a normal message: the stream's own message changed in place when it is
        still there (nothing said twice; the SDK's `ChatStream.ts` names `chat.update` as the
        fallback "if the stream expires server-side"), else posted in the thread (nothing
        lost). Later versions change that message."""
        message = plan.as_message(content, row.debate_id or 0)
        state = StreamState.CLOSED if content.final else StreamState.MESSAGE
        channel = row.deliveries[0][0] if row.deliveries else row.channel_id
        if ts:
            try:
                await self.poster.update(channel=channel, ts=ts, message=message, attempts=1)
            except PostError as error:
                code = await self.outcomes.answered(row, error)
                if code is None:
                    return False
                if code in STILL_STREAMING:
                    # Our stop did not take: try it again, and the change after it.
                    await self.abandon(channel, ts, code)
                    await self.outcomes.retry(row, error)
                    return False
                log.warning(
                    "debate %s: the plan's message %s cannot be changed (%s); posting it anew",
                    row.debate_id,
                    ts,
                    code,
                )
            else:
                await self.streamed(row, content.chunks, state, delivered_to="message")
                return False
        if debate.thread_ts is None:
            await self.outcomes.fail(row, "the debate's thread was never posted")
            return False
        try:
            posted = await self.poster.post(
                channel=row.channel_id, message=message, thread_ts=debate.thread_ts, attempts=1
            )
        except UnthreadedError as error:
            # Nothing goes to the top level: the post lane re-creates the thread on its next
            # reply, and the plan follows it there.
            await self.threads.remove_stray(error.stray)
            await self.outcomes.retry(row, error)
            return False
        except PostError as error:
            code = await self.outcomes.answered(row, error)
            if code is not None:
                await self.outcomes.give_up(row, code)
            return False
        await self.streamed(
            row,
            content.chunks,
            state,
            deliveries=[[posted.channel, posted.ts]],
            thread_ts=debate.thread_ts,
            delivered_to="message",
        )
        return False

    async def streamed(
        self,
        row: Outbox,
        streamed: list[dict[str, object]],
        state: StreamState,
        *,
        deliveries: list[list[str]] | None = None,
        thread_ts: str | None = None,
        delivered_to: str = "stream",
        more: bool = False,
    ) -> None:
        """Record what Slack has of the stream, and where its message stands."""
        self.outcomes.recovered()
        owner = self.outcomes.owner
        await self.outcomes.db(
            lambda s: outbox_stream.mark_streamed(
                s,
                row_id=row.id or 0,
                owner=owner,
                version=row.version,
                streamed=streamed,
                stream_state=state,
                deliveries=deliveries,
                thread_ts=thread_ts,
                delivered_to=delivered_to,
                more=more,
            )
        )
        await self.outcomes.proven(row)
