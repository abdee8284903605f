"""How a worker learns that a person stopped one of its debates (issue 44), within a poll:
one read of the store for all of its running debates every `poll_s` (not one per debate, so
200 debates cost one indexed query), and the run's task of each one asked is cancelled at
once, so the model call in flight is abandoned (its HTTP request closed, a local generation
interrupted) rather than awaited."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from bot.store import cancels, queue, turns
from bot.store.db import in_session
from bot.store.debate_tables import Debate
from bot.store.errors import DatabaseUnavailableError
from bot.store.tenancy import EVERY_WORKSPACE
from bot.store.turns import ChainHead
from engine.models import DebateResult, DebateSpec, TurnRecord
from engine.runner import ended_cancelled

log = logging.getLogger(__name__)

DEFAULT_POLL_S = 0.5


class CancelWatch:
    """The cancel requests of the debates one worker runs. `watch` registers a run's task;
    while any is registered, a poller reads the requests and cancels the task of each debate
    asked to stop (`asked` then says so, so the run records a cancelled ending rather than a
    lost lease)."""

    def __init__(self, engine: Engine, *, poll_s: float = DEFAULT_POLL_S) -> None:
        self.engine = engine
        self.poll_s = poll_s
        self._running: dict[int, asyncio.Task[Any]] = {}
        self._asked: set[int] = set()
        self._poller: asyncio.Task[None] | None = None

    def watch(self, debate_id: int, task: asyncio.Task[Any]) -> None:
        """Watch `debate_id`, whose run is `task`, until `unwatch`."""
        self._running[debate_id] = task
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())

    def unwatch(self, debate_id: int) -> None:
        self._running.pop(debate_id, None)
        self._asked.discard(debate_id)

    async def stop(self, debate_id: int) -> None:
        """Stop the run of `debate_id` from inside it (its last turn's write found the request):
        its task is cancelled, and the cancellation is raised here, before another call."""
        task = self._running.get(debate_id)
        if task is not None:
            self._asked.add(debate_id)
            task.cancel()
            await asyncio.sleep(0)

    def asked(self, debate_id: int) -> bool:
        """Whether a person asked to stop `debate_id` while it was watched."""
        return debate_id in self._asked

    @staticmethod
    def _asked_now(ids: list[int]) -> Callable[[Session], set[int]]:
        return lambda session: cancels.cancels_among(session, debate_ids=ids)

    async def _poll(self) -> None:
        while self._running:
            await asyncio.sleep(self.poll_s)
            try:
                found = await in_session(
                    self.engine, self._asked_now(list(self._running)), workspace=EVERY_WORKSPACE
                )
            except DatabaseUnavailableError as error:
                log.warning("cancel requests not read (%s); read again next poll", error)
                continue
            for debate_id in found - self._asked:
                task = self._running.get(debate_id)
                if task is not None:
                    log.info(
                        "debate %s: a person asked to stop it; its call is abandoned", debate_id
                    )
                    self._asked.add(debate_id)
                    task.cancel()


async def stopped_run(
    engine: Engine, debate_id: int, spec: DebateSpec
) -> tuple[DebateResult, ChainHead]:
    """The CANCELLED result of a run a person stopped, with the turns as stored, and its chain's
    head read back (the one the run kept may miss a write the cancel cut short)."""

    def read(session: Session) -> tuple[Debate, tuple[list[TurnRecord], ChainHead]]:
        stopped = queue.get_debate(session, debate_id=debate_id)
        return stopped, turns.stored_runs(session, debate_ids=[debate_id])[debate_id]

    stopped, (recorded, head) = await in_session(engine, read, workspace=EVERY_WORKSPACE)
    reason = cancels.cancel_reason(stopped)
    log.info("debate %s: %s", debate_id, reason)
    return ended_cancelled(spec, reason, recorded), head
