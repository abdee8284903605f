"""Group commit of turns: every turn finished while one batch is being written goes into the
next batch, one transaction for all of them.

Each caller still waits until its own turn is committed (a turn is stored before the debate's
next model call, as before); what changes is the cost. With 200 debates running, their turns
finish a few milliseconds apart, and one transaction per turn, each waiting for the previous
one's commit, put the store on every debate's critical path. One transaction per batch costs
one commit for all of them.
"""

from __future__ import annotations

import asyncio
import functools

from sqlalchemy import Engine
from sqlmodel import Session

from bot.store import repository
from bot.store.db import in_session
from bot.store.errors import LeaseLostError, StoreRefusedError
from bot.store.repository import ChainHead, TurnWrite

MAX_BATCH = 500
"""Turns per transaction at most, so one commit stays short under any burst."""


def _append(
    writes: list[TurnWrite], session: Session
) -> list[ChainHead | LeaseLostError | StoreRefusedError]:
    return repository.append_turns(session, writes=writes)


class TurnWriter:
    """Appends turns of any number of debates on one engine, batching those that arrive
    together. One per process and engine (the composition root builds it)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._pending: list[tuple[TurnWrite, asyncio.Future[ChainHead]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def append(self, write: TurnWrite) -> ChainHead:
        """Store `write`'s turn; returns the debate's new head once it is committed. Raises
        LeaseLostError, StoreRefusedError or DatabaseUnavailableError as a single write would."""
        future: asyncio.Future[ChainHead] = asyncio.get_running_loop().create_future()
        self._pending.append((write, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            writes = [write for write, _ in batch]
            try:
                outcomes = await in_session(self.engine, functools.partial(_append, writes))
            except Exception as error:  # noqa: BLE001 - handed to every waiting caller, not kept
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, ChainHead):
                    future.set_result(outcome)
                else:
                    future.set_exception(outcome)
