"""What `/healthz` answers: whether the store is usable, bounded in time."""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass, field

from sqlalchemy import Engine

from bot.slackweb.token import TokenGate
from bot.store import refusals
from bot.store.db import health, session_scope
from bot.store.errors import StoreError
from bot.store.tenancy import EVERY_WORKSPACE


@dataclass(eq=False)
class HealthProbe:
    """What `/healthz` answers anyone: whether the database is usable (a missing or read-only
    SQLite file, a full disk, an unreachable server or an old schema is not) and how many
    debates this process runs at once, with no names, hosts or users in it; and, in a process
    that delivers to Slack, whether Slack takes the bot token. With OAuth installs
    (`workspaces`) one workspace's refused token does not make the deployment unhealthy (a load
    balancer would take every workspace's bot away): the answer counts the installs whose
    token Slack refuses (an org-wide one counts once, however many workspaces it holds), naming
    none (`debatebot workspace list` names them).

    The check runs off the event loop and is bounded: a database that does not answer within
    `timeout_s` (under the image's 4-second probe) is reported `unavailable`. One check runs at
    a time: while one is stuck in a hung database, the next probes wait for it (still bounded)
    instead of each leaving a thread stuck in asyncio's shared executor, whose threads also
    resolve Slack's host name for every connection."""

    engine: Engine
    concurrency: int
    _: KW_ONLY
    timeout_s: float = 3.0
    gate: TokenGate | None = None
    workspaces: bool = False
    _running: asyncio.Future[tuple[str | None, int | None]] | None = field(default=None, init=False)

    def _check(self) -> tuple[str | None, int | None]:
        """The database's problem, and (with OAuth installs, when it has none) how many
        installs' bot tokens Slack refuses."""
        problem = health(self.engine)
        if problem is not None or not self.workspaces:
            return problem, None
        try:
            with session_scope(self.engine, workspace=EVERY_WORKSPACE) as session:
                return None, refusals.refused_count(session)
        except StoreError:
            return "unavailable", None

    async def __call__(self) -> dict[str, object]:
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(asyncio.to_thread(self._check))
        try:
            problem, refused = await asyncio.wait_for(asyncio.shield(self._running), self.timeout_s)
        except TimeoutError:
            problem, refused = "unavailable", None
        report: dict[str, object] = {
            "ok": problem is None,
            "database": problem or "ok",
            "concurrency": self.concurrency,
        }
        if refused is not None:
            report["installs_token_refused"] = refused
        if self.gate is not None and self.gate.refused:
            report["ok"] = False
            report["slack"] = self.gate.problem()
        return report
