"""The post lanes: a debate's posts in order (parent, rounds, verdict, review request, notices),
and a channel's own posts with no debate (the digest), each sent once (bot.jobs.resend_check).

A post refused for its size is re-split smaller once; anything else Slack refuses is given up
with a short notice in the thread, and the next post goes on. A thread that cannot be reached
(`not_in_channel`, `channel_not_found`, `is_archived`) halts its debate (the worker stops at
the next turn), tells the requester by DM, and sends the review request by DM to the
reviewers, else the requester, else the workspace admins. A lost thread is moved
(bot.jobs.delivery.threads). A receipt file is shared by its own rules (bot.jobs.delivery.files).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.jobs.delivery.files import ReceiptFiles
from bot.jobs.delivery.outcomes import THREAD_GONE, TOO_BIG, UNREACHABLE, Outcomes, owner_of
from bot.jobs.delivery.threads import ThreadMoves
from bot.jobs.resend_check import SendOnce
from bot.messages import kit, posts, receipt_file
from bot.slackweb.errors import PostError, UnthreadedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import Posted
from bot.store import outbox_claims, outbox_deliveries
from bot.store.debate_tables import Debate
from bot.store.outbox import Draft
from bot.store.outbox_tables import Outbox, OutboxFallback, OutboxTarget

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class PostLanes:
    """Delivers the head of a debate's post lane, or of a channel's own, one at a time."""

    outcomes: Outcomes
    directory: SlackDirectory
    once: SendOnce
    threads: ThreadMoves
    files: ReceiptFiles

    async def next_channel_post(self, channel: str, team_id: str) -> bool:
        """Deliver the head of a channel's own posts (in workspace `team_id`): retried,
        re-split and given up by the same rules as a debate's, with no thread to tell when one
        is refused."""
        owner, claim_s = self.outcomes.owner, self.outcomes.config.claim_s
        row = await self.outcomes.db(
            lambda s: outbox_claims.claim_channel_head(
                s, channel_id=channel, team_id=team_id, owner=owner, claim_s=claim_s
            )
        )
        if row is None:
            return False
        try:
            async with self.outcomes.handed_back_if_cancelled(row):
                posted = await self.once.post(
                    row, channel=row.channel_id, message=kit.Message(row.text, row.blocks)
                )
        except PostError as error:
            code = await self.outcomes.answered(row, error)
            if code is None:
                return False
            if code in TOO_BIG and row.part == 0:
                await self._resplit(row, code)
                return True
            await self.outcomes.refuse(row, code)
            return True
        await self.outcomes.sent(row, [posted], "channel")
        return True

    async def next_post(self, debate_id: int) -> bool:
        """Deliver the head of the debate's post lane; True when the next one may follow now."""
        owner, claim_s = self.outcomes.owner, self.outcomes.config.claim_s
        claimed = await self.outcomes.db(
            lambda s: outbox_claims.claim_head(s, debate_id=debate_id, owner=owner, claim_s=claim_s)
        )
        if claimed is None:
            return False
        row, debate = claimed
        async with self.outcomes.handed_back_if_cancelled(row):
            return await self._post(row, debate)

    async def _post(self, row: Outbox, debate: Debate) -> bool:
        if receipt_file.is_file(row.key):
            return await self.files.send(row, debate)
        if row.target == OutboxTarget.DM:
            delivered = await self._direct(row, list(row.recipients), "direct message")
            if delivered is False:
                await self.outcomes.fail(row, "no recipient could be sent a DM")
            return delivered is True
        if debate.halt_reason is not None:
            return await self._unreachable(row, debate, debate.halt_reason)
        thread_ts = None
        if row.target == OutboxTarget.THREAD:
            thread_ts = debate.thread_ts
            if thread_ts is None:
                return await self._unreachable(row, debate, "the debate's thread was never posted")
        try:
            posted = await self.once.post(
                row,
                channel=row.channel_id,
                message=kit.Message(row.text, row.blocks),
                thread_ts=thread_ts,
            )
        except PostError as error:
            return await self._post_failed(row, debate, error)
        await self.outcomes.sent(row, [posted], "thread" if thread_ts else "channel")
        return True

    async def _post_failed(self, row: Outbox, debate: Debate, error: PostError) -> bool:
        if isinstance(error, UnthreadedError):
            await self.threads.remove_stray(error.stray)
            return await self._move(row, debate, error.code)
        code = await self.outcomes.answered(row, error)
        if code is None:
            return False
        if code in UNREACHABLE:
            reason = f"cannot post in <#{row.channel_id}> ({code})"
            await self.outcomes.halt(debate, reason)
            return await self._unreachable(row, debate, reason)
        if code in THREAD_GONE and row.target == OutboxTarget.THREAD:
            return await self._move(row, debate, code)
        if code in TOO_BIG and row.part == 0:
            await self._resplit(row, code)
            return True
        await self.outcomes.give_up(row, code)
        return True

    async def _move(self, row: Outbox, debate: Debate, code: str) -> bool:
        """Move the debate's thread for a post; a re-post that fails is the post's own failure."""
        try:
            return await self.threads.move(row, debate, code)
        except PostError as error:
            return await self._post_failed(row, debate, error)

    async def _resplit(self, row: Outbox, code: str) -> None:
        """Replace a message refused for its size by smaller parts, sent in its place."""
        parts = kit.resplit(kit.Message(row.text, row.blocks))
        drafts = [Draft(key="", text=p.text, blocks=p.blocks) for p in parts]
        await self.outcomes.db(
            lambda s: outbox_deliveries.split(
                s, row_id=row.id or 0, owner=self.outcomes.owner, error=code, parts=drafts
            )
        )
        log.warning("%s: %s refused (%s); re-split", owner_of(row), row.key, code)

    async def _unreachable(self, row: Outbox, debate: Debate, reason: str) -> bool:
        """The thread cannot be reached: review requests go by DM (reviewers, else the
        requester, else the workspace admins); anything else is given up."""
        if row.fallback != OutboxFallback.REVIEWERS:
            await self.outcomes.fail(row, f"thread unreachable: {reason}")
            return True
        chain: list[tuple[str, list[str] | None]] = [
            ("reviewers", await self.directory.people_in(row.recipients)),
            ("requester", [debate.requested_by] if debate.requested_by else []),
            ("workspace admins", None),
        ]
        for label, people in chain:
            try:
                users = people if people is not None else await self.directory.admins()
            except PostError as error:
                if await self.outcomes.retried(row, error):
                    return False
                users = []
            if not users:
                continue
            delivered = await self._direct(row, users, label, reason=reason)
            if delivered is not False:
                return delivered is True
        await self.outcomes.fail(
            row, f"thread unreachable ({reason}) and no one could be sent a DM"
        )
        return True

    async def _direct(
        self, row: Outbox, users: list[str], label: str, *, reason: str | None = None
    ) -> bool | None:
        """DM the message to each of `users`. True: at least one copy was delivered (and
        recorded); None: nothing was, but trying later may help (the row is rescheduled);
        False: every recipient refused."""
        message = kit.Message(row.text, row.blocks)
        if reason is not None:
            message = posts.direct(message, channel_id=row.channel_id, reason=reason)
        delivered: list[tuple[str, Posted]] = []
        transient: PostError | None = None
        for user in users:
            try:
                channel = await self.directory.dm_channel(user)
                delivered.append(
                    (user, await self.once.post(row, channel=channel, message=message))
                )
            except PostError as error:
                log.warning("debate %s: DM to %s failed: %s", row.debate_id, user, error)
                if error.retryable:
                    transient = error
        if delivered:
            names = ",".join(user for user, _ in delivered)
            await self.outcomes.sent(
                row, [posted for _, posted in delivered], f"dm to {label}: {names}"
            )
            return True
        if transient is not None:
            await self.outcomes.retry(row, transient)
            return None
        return False
