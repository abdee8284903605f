"""Thread moves: a deleted parent (or thread root) is posted again as a new parent that links the
old thread, and the debate goes on there; so does a thread Slack stopped threading (a reply it
stored outside the thread is deleted, and nothing more is posted at the top level). Two lanes
of a debate finding it gone together (its next round and the parent's summary) move it once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from sqlmodel import Session

from bot.jobs.delivery.outcomes import Outcomes
from bot.messages import owed
from bot.slackweb.errors import PostError
from bot.slackweb.poster import SLACK_FAILURES, Posted, SlackPoster
from bot.store import outbox, outbox_deliveries
from bot.store.debate_tables import Debate
from bot.store.outbox import PARENT
from bot.store.outbox_tables import Outbox, OutboxAction
from engine.models import DebateSpec

log = logging.getLogger(__name__)

MAX_REPOSTS = 3


@dataclass(kw_only=True)
class ThreadMoves:
    """Posts a debate's parent again where its thread was lost, once for all its lanes."""

    outcomes: Outcomes
    poster: SlackPoster
    _moving: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def move(self, row: Outbox, debate: Debate, code: str) -> bool:
        """The thread's root, or the parent an update changes, is gone: post the parent again,
        and send `row` again there; True when the lane's next message may follow now. A failed
        re-post is raised for a post (the post lane handles it as the post's own failure: a
        lost channel halts the debate); for anything else it is retried or given up."""
        assert debate.id is not None
        debate_id = debate.id

        def now(s: Session) -> tuple[Debate | None, str]:
            return s.get(Debate, debate_id), outbox.current_parent(s, debate_id=debate_id)

        try:
            async with self._moving:
                current, parent_key = await self.outcomes.db(now)
                assert current is not None
                if row.action == OutboxAction.UPDATE:
                    # An update was claimed with the parent it changed; it has a newer one now.
                    moved_before = parent_key != row.target_key
                else:
                    # A post was claimed with the debate's thread; it is in a newer one now.
                    moved_before = current.thread_ts != debate.thread_ts
                if moved_before:
                    moved: Posted | None = Posted(
                        channel=current.channel_id or row.channel_id, ts=current.thread_ts or ""
                    )
                else:
                    moved = await self._repost_parent(debate, code)
        except PostError as error:
            if row.action == OutboxAction.POST:
                raise
            if await self.outcomes.retried(row, error):
                return False
            await self.outcomes.give_up(row, error.code)
            return True
        if moved is None:
            await self.outcomes.give_up(row, code)
            return True
        if row.key == PARENT and row.action == OutboxAction.POST:
            # The parent a thread was to open with: the one posted again stands for it, so the
            # question is not shown twice.
            await self.outcomes.sent(row, [moved], "re-created parent")
            return True
        await self.outcomes.release(row)
        return True

    async def remove_stray(self, stray: Posted) -> None:
        """Delete a reply Slack stored outside its thread: at the channel's top level it reads
        out of context, and the debate goes on in a new thread. If Slack will not delete it, it
        is left, and said so in the log."""
        try:
            await self.poster.delete(channel=stray.channel, ts=stray.ts)
        except PostError as error:
            log.warning(
                "a reply posted outside its thread (%s in %s) was left: %s",
                stray.ts,
                stray.channel,
                error,
            )

    async def _repost_parent(self, debate: Debate, code: str) -> Posted | None:
        """Post the parent again at the top level, linking the old thread; None when it was
        already re-posted `MAX_REPOSTS` times (something else is wrong). Raises PostError."""
        assert debate.id is not None
        debate_id, channel = debate.id, debate.channel_id or ""
        if await self.outcomes.db(
            lambda s: outbox.row_for(s, debate_id=debate_id, key=f"{PARENT}:{MAX_REPOSTS + 1}")
        ):
            return None
        spec = DebateSpec.model_validate_json(debate.spec_json)
        link = await self._permalink(channel, debate.thread_ts) if debate.thread_ts else None
        message = owed.reposted_parent(debate, spec, old_link=link)
        posted = await self.poster.post(channel=channel, message=message, attempts=1)
        await self.outcomes.db(
            lambda s: outbox_deliveries.new_parent(
                s,
                debate_id=debate_id,
                channel_id=channel,
                ts=posted.ts,
                text=message.text,
                blocks=message.blocks,
                becomes_thread=True,
            )
        )
        log.warning("debate %s: parent posted again (%s)", debate_id, code)
        return posted

    async def _permalink(self, channel: str, ts: str) -> str | None:
        try:
            response = await self.poster.client.chat_getPermalink(channel=channel, message_ts=ts)
        except SLACK_FAILURES as error:
            # A link is a nicety: the parent is posted again without one.
            log.info("no permalink for %s in %s: %s", ts, channel, error)
            return None
        link = response.get("permalink")
        return str(link) if link else None
