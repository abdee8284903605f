"""What becomes of a claimed message, for every lane: the one error ladder and its bookkeeping.

A Slack failure is read the same way wherever it meets a message (`Outcomes.answered`): one
Slack may take later (5xx, timeout, connection error, 429, a transient code) is retried with
exponential backoff, honouring `Retry-After`, until the message's deadline; any other answer
shows Slack answers again, so every message waiting out a backoff is made due at once, and the
refusal's code is handed to the lane's own rungs (the code sets below). A refused bot token is
no `PostError`: it leaves the lane (bot.jobs.delivery.holds). A message refused for good is
given up, with a notice in its thread (`give_up`), or without one (`refuse`, `fail`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.jobs.delivery.config import DeliveryConfig
from bot.messages import owed
from bot.slackweb.errors import PostError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import Posted
from bot.store import outbox_claims, outbox_deliveries, refusals
from bot.store.db import in_session
from bot.store.debate_tables import Debate
from bot.store.errors import DatabaseUnavailableError
from bot.store.outbox import SHOWN_IN_STREAM, Draft
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import EVERY_WORKSPACE, PENDING_TEAM, Workspace

log = logging.getLogger(__name__)
R = TypeVar("R")

UNREACHABLE = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
"""The bot lost the channel: its debate halts, and a review request goes by DM."""
THREAD_GONE = frozenset({"thread_not_found", "message_not_found", "invalid_thread_ts"})
"""The thread's root, or the message an update changes, was deleted: the parent is posted
again (bot.jobs.delivery.threads)."""
TOO_BIG = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks"})
"""Refused for its size: re-split smaller, once."""
STREAM_CLOSED = frozenset({"message_not_in_streaming_state", "stopped_by_user"})
"""chat.appendStream and chat.stopStream on a stream that no longer takes chunks: "The message
is not in the streaming state" (stopped, or past the few minutes Slack keeps a stream open),
or someone pressed its stop. The message is still there, and can be changed as a message."""
STREAM_GONE = frozenset({"message_not_found"})
"""chat.appendStream and chat.stopStream: the streamed message is gone (deleted)."""
STILL_STREAMING = frozenset({"streaming_state_conflict"})
"""chat.update on a message that is still streaming."""
METHOD_ABSENT = frozenset({"unknown_method"})
"""Slack's answer to a method it does not have (an older workspace, a stand-in without
streaming): no later debate of this process asks for a stream again."""


@dataclass(kw_only=True)
class Outcomes:
    """Records what became of each claimed message, and reads every Slack failure (above)."""

    engine: Engine
    directory: SlackDirectory
    owner: str
    config: DeliveryConfig
    rng: random.Random
    wake: Callable[[], None]
    """Look for due messages now (rows were just made due)."""
    probation: list[refusals.BotState] = field(default_factory=list, init=False)
    """The bots a probe took with nothing delivered since (`refusals.on_probation`), as of the
    last look for due lanes: a delivery to one of their workspaces proves it."""
    _failing: bool = field(default=False, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    async def db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work, workspace=EVERY_WORKSPACE)

    # --- the ladder --------------------------------------------------------------------------

    async def retried(self, row: Outbox, error: PostError) -> bool:
        """Whether Slack may take it later (`error.retryable`): then `row` waits out a backoff."""
        if not error.retryable:
            return False
        await self.retry(row, error)
        return True

    async def answered(self, row: Outbox, error: PostError) -> str | None:
        """Every failed write's first rung: None when `row` was rescheduled (`retried`); else
        Slack answered, so what waits out a backoff is pulled in, and the refusal's code is
        returned for the caller's own rungs."""
        if await self.retried(row, error):
            return None
        self.recovered()
        return error.code

    def _backoff(self, row: Outbox, error: PostError) -> float:
        exponential = self.config.backoff_base_s * 2.0 ** min(row.attempts, 16)
        capped = min(self.config.backoff_max_s, exponential)
        delay = capped / 2 + self.rng.uniform(0, capped / 2)
        return max(delay, error.retry_after_s or 0.0)

    async def retry(self, row: Outbox, error: PostError) -> None:
        self._failing = True
        delay = self._backoff(row, error)
        log.warning(
            "%s: %s not delivered (%s: %s); retry %d in %.1fs",
            owner_of(row),
            row.key,
            error.code,
            error,
            row.attempts + 1,
            delay,
        )
        updated = await self.db(
            lambda s: outbox_deliveries.mark_retry(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                error=f"{error.code}: {error}",
                delay_s=delay,
            )
        )
        if updated is not None and updated.state == OutboxState.FAILED:
            log.error("%s: %s given up after its deadline", owner_of(row), row.key)

    async def retry_quietly(self, row: Outbox) -> None:
        """`row` waits for the message it changes or follows: no failed attempt is counted."""
        await self.db(
            lambda s: outbox_deliveries.mark_retry(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                error="waiting for the message it changes",
                delay_s=self.config.poll_s,
                failed_attempt=False,
            )
        )

    def recovered(self) -> None:
        """Slack answered: pull every message waiting out a backoff forward."""
        if self._failing:
            self._failing = False
            task = asyncio.get_running_loop().create_task(self._pull_in())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _pull_in(self) -> None:
        moved = await self.db(outbox_claims.pull_in_retries)
        if moved:
            log.info("Slack answers again; %d waiting message(s) are due now", moved)
            self.wake()

    # --- what became of the message ----------------------------------------------------------

    async def sent(self, row: Outbox, posted: list[Posted], where: str) -> None:
        self.recovered()
        await self.db(
            lambda s: outbox_deliveries.mark_sent(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                version=row.version,
                deliveries=[[p.channel, p.ts] for p in posted],
                delivered_to=where,
            )
        )
        if where != SHOWN_IN_STREAM:
            await self.proven(row)

    async def proven(self, row: Outbox) -> None:
        """Slack took a message of `row`'s workspace: if a probe's word was all its bot had
        (`refusals.on_probation`), the token is proven, and a later refusal is news again."""
        workspace = Workspace(team_id=row.team_id or PENDING_TEAM, enterprise_id=row.enterprise_id)
        if not any(_may_serve(bot, workspace) for bot in self.probation):
            return
        if await self.db(lambda s: refusals.delivered(s, workspace=workspace)):
            log.info("delivery to workspace %s works again", workspace.team_id)
        self.probation = [bot for bot in self.probation if not _may_serve(bot, workspace)]

    async def release(self, row: Outbox) -> None:
        await self.db(lambda s: outbox_claims.release(s, row_id=row.id or 0, owner=self.owner))

    @contextlib.asynccontextmanager
    async def handed_back_if_cancelled(self, row: Outbox) -> AsyncIterator[None]:
        """A lane cancelled mid-send (the process is stopping) hands its claimed row back,
        due at once; if the database does not answer, the claim lapses in `claim_s`."""
        try:
            yield
        except asyncio.CancelledError:
            with contextlib.suppress(DatabaseUnavailableError):
                await self.release(row)
            raise

    async def fail(self, row: Outbox, error: str, notices: list[Draft] | None = None) -> None:
        log.error("%s: %s not delivered: %s", owner_of(row), row.key, error)
        await self.db(
            lambda s: outbox_deliveries.mark_failed(
                s, row_id=row.id or 0, owner=self.owner, error=error, notices=notices or []
            )
        )

    async def refuse(self, row: Outbox, code: str) -> None:
        """Slack refused the message for good: given up, with no notice."""
        await self.fail(row, f"refused by Slack: {code}")

    async def give_up(self, row: Outbox, code: str) -> None:
        """Slack refused the message for good: say so in the thread, and go on."""
        notices = []
        if not row.key.startswith("notice:"):
            notices.append(owed.given_up(row.debate_id, row.key, code))
        await self.fail(row, f"refused by Slack: {code}", notices)

    async def halt(self, debate: Debate, reason: str) -> None:
        """Stop the debate at its next turn and tell the requester why, by DM."""
        assert debate.id is not None
        debate_id = debate.id
        notices = []
        if debate.requested_by:
            _, name = await self.directory.bot_identity()
            notices.append(owed.halted(debate, reason, name))
        halted = await self.db(
            lambda s: outbox_deliveries.halt(s, debate_id=debate_id, reason=reason, notices=notices)
        )
        if halted:
            log.error("debate %s halted: %s", debate_id, reason)
            debate.halt_reason = reason
            self.wake()


def _may_serve(bot: refusals.BotState, workspace: Workspace) -> bool:
    """Whether `workspace` may act with `bot`: its own install's, or its org's org-wide one
    (which one it does, the store knows: `refusals.delivered`)."""
    if bot.team_id is not None:
        return bot.team_id == workspace.team_id
    return workspace.enterprise_id is not None and bot.enterprise_id == workspace.enterprise_id


def owner_of(row: Outbox) -> str:
    """Whose message `row` is, for the log: a debate's, or a channel's own."""
    return f"channel {row.channel_id}" if row.debate_id is None else f"debate {row.debate_id}"
