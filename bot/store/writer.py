"""Group commit: the store writes the worker's hot path makes (turns here, endings in
`bot.jobs.closing`) go in batches, everything that arrives while one batch is being written
going into the next, one transaction for each batch.

Each caller still waits until its own write is committed (a turn is stored before the debate's
next model call, an ending before the run reports it), so durability is what it was. What
changes is the cost: with 200 debates running, their turns finish milliseconds apart, and one
transaction per write, each waiting for the previous one's commit, put the store on every
debate's critical path. One transaction per batch costs one commit for all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.store import turns
from bot.store.db import in_session
from bot.store.tenancy import EVERY_WORKSPACE
from bot.store.turns import ChainHead, TurnWrite

W = TypeVar("W")
R = TypeVar("R")

MAX_BATCH = 500
"""Writes per transaction at most, so one commit stays short under any burst."""

BatchWork = Callable[[Session, Sequence[W]], Sequence[R | Exception]]
"""Applies a batch in the session and commits once; returns each write's result or error."""


class GroupWriter(Generic[W, R]):
    """Batches writes of one kind on one engine. One per process and engine (the composition
    root builds them); the batch function decides what a write is."""

    def __init__(self, engine: Engine, work: BatchWork[W, R]) -> None:
        self.engine = engine
        self.work = work
        self._pending: list[tuple[W, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, write: W) -> R:
        """Write `write` with whatever else is waiting; returns its result once committed, or
        raises its error (or the batch's, when the database failed them all)."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((write, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    def _applying(self, writes: Sequence[W]) -> Callable[[Session], Sequence[R | Exception]]:
        return lambda session: self.work(session, writes)

    async def _flush(self) -> None:
        while self._pending:
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            writes = [write for write, _ in batch]
            try:
                outcomes = await in_session(
                    self.engine, self._applying(writes), workspace=EVERY_WORKSPACE
                )
            except Exception as error:  # noqa: BLE001 - handed to every waiting caller, not kept
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)


def _append(session: Session, writes: Sequence[TurnWrite]) -> Sequence[ChainHead | Exception]:
    return turns.append_turns(session, writes=writes)


class TurnWriter(GroupWriter[TurnWrite, ChainHead]):
    """Appends turns of any number of debates, each chained to its debate's head."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, _append)

    async def append(self, write: TurnWrite) -> ChainHead:
        """Store the turn; returns the debate's new head. Raises LeaseLostError,
        StoreRefusedError or DatabaseUnavailableError as a single write would."""
        return await self.submit(write)
