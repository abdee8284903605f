"""What `/healthz` answers: whether the store is usable, bounded in time."""

from __future__ import annotations

import asyncio

from sqlalchemy import Engine

from bot.slackweb.token import TokenGate
from bot.store.db import health


class HealthProbe:
    """What `/healthz` answers anyone: whether the database is usable (a missing or read-only
    SQLite file, a full disk, an unreachable server or an old schema is not) and how many
    debates this process runs at once, with no names, hosts or users in it; and, in a process
    that delivers to Slack, whether Slack takes the bot token.

    The check runs off the event loop and is bounded: a database that does not answer within
    `timeout_s` (under the image's 4-second probe) is reported `unavailable`. One check runs at
    a time: while one is stuck in a hung database, the next probes wait for it (still bounded)
    instead of each leaving a thread stuck in asyncio's shared executor, whose threads also
    resolve Slack's host name for every connection."""

    def __init__(
        self,
        engine: Engine,
        concurrency: int,
        *,
        timeout_s: float = 3.0,
        gate: TokenGate | None = None,
    ) -> None:
        self.engine = engine
        self.gate = gate
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self._running: asyncio.Future[str | None] | None = None

    async def __call__(self) -> dict[str, object]:
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(asyncio.to_thread(health, self.engine))
        try:
            problem = await asyncio.wait_for(asyncio.shield(self._running), self.timeout_s)
        except TimeoutError:
            problem = "unavailable"
        report: dict[str, object] = {
            "ok": problem is None,
            "database": problem or "ok",
            "concurrency": self.concurrency,
        }
        if self.gate is not None and self.gate.refused:
            report["ok"] = False
            report["slack"] = self.gate.problem()
        return report
