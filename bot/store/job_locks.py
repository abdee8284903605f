"""Locks that let one replica at a time run a scheduled job: PostgreSQL's advisory lock, or,
on SQLite (one process), an asyncio lock."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from bot.store.db import store_executor


def advisory_key(job: str) -> int:
    """A stable 64-bit PostgreSQL advisory lock key for `job`."""
    digest = hashlib.sha256(f"debatebot:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class JobLock:
    """Whether this process may run a job now: PostgreSQL's advisory lock, held on a connection
    of its own for the run (a crashed holder's lock goes with its connection); on SQLite, one
    process, an asyncio lock."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local: dict[str, asyncio.Lock] = {}

    async def _in_store(self, work: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(store_executor(self.engine), work)

    async def acquire(self, job: str) -> Connection | bool:
        """A token to `release`, or False when another holder runs the job."""
        if self.engine.dialect.name != "postgresql":
            lock = self._local.setdefault(job, asyncio.Lock())
            if lock.locked():
                return False
            await lock.acquire()
            return True

        def take() -> Connection | bool:
            connection = self.engine.connect()
            got = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": advisory_key(job)}
            ).scalar()
            connection.commit()
            if got:
                return connection
            connection.close()
            return False

        taken: Connection | bool = await self._in_store(take)
        return taken

    async def release(self, job: str, token: Connection | bool) -> None:
        if not isinstance(token, Connection):
            self._local[job].release()
            return

        def give_back() -> None:
            try:
                token.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": advisory_key(job)})
                token.commit()
            except SQLAlchemyError:
                token.invalidate()
            finally:
                token.close()

        await self._in_store(give_back)
