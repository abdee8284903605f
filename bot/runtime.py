"""The background work of a long-running process, started and stopped one way for `serve` and
`worker`: the debate worker pool, the delivery loop (in a process that holds the bot token) and
the scheduled jobs; and, for `serve`, the Slack app around it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.jobs.notifier import DebateNotifier
from bot.jobs.worker import DebateWorker
from bot.metrics import Metrics
from bot.settings import SettingsError
from bot.slackweb.errors import PostError
from bot.slackweb.token import SETTING, token_fix
from bot.store.db import in_session
from bot.store.errors import DatabaseUnavailableError
from bot.store.tenancy import EVERY_WORKSPACE
from bot.store.verify import adopt_pending_records

if TYPE_CHECKING:
    import aiohttp
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from slack_bolt.async_app import AsyncApp
    from sqlalchemy import Engine

    from bot.jobs.delivery import OutboxDelivery
    from bot.jobs.scheduled import ScheduledJobs
    from bot.slack.after_ack import AfterAck
    from bot.slack.held import HeldEvents
    from bot.slack.server import BotASGI
    from bot.slack.surface import Surfaces
    from bot.slackweb.people import SlackDirectory


log = logging.getLogger(__name__)


@contextlib.contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """For a long-running command: what start-up built (modules, mappers, schemas, prompts) is
    kept out of the garbage collector's view until the block ends.

    That heap lives as long as the process, yet a full collection walks all of it, holding the
    interpreter lock while a pool launches its first model calls (`benchmarks/scale.py`
    measures it). What start-up left as garbage is frozen with it and freed once, when the
    block ends.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def check_bot_token(
    directory: SlackDirectory, engine: Engine, *, audit_key: bytes | None
) -> None:
    """At start-up: SettingsError naming DEBATEBOT_SLACK_BOT_TOKEN when Slack refuses the bot
    token (nothing the process does could reach anyone). Slack not answering is no refusal: it
    is logged, and the process starts (delivery retries, `auth.test` is asked again).

    Once Slack names the token's workspace, the rows a database from before workspaces held
    (team `pending`, migration 0020) become that workspace's, the seals covering it sealed again
    with `audit_key` (`adopt_pending_records`); a store that cannot take that write now (served
    read-only) is logged, and the next start moves them."""
    try:
        refused = await directory.check_token()
    except PostError as error:
        log.warning("could not check the bot token with Slack (%s); starting anyway", error)
        return
    if refused is not None:
        raise SettingsError(
            f"Slack refused {SETTING} ({refused.code}): {token_fix(refused.code, refused.needed)}"
        )
    workspace = directory.known_workspace()
    if workspace is not None:
        try:
            moved = await in_session(
                engine,
                lambda s: adopt_pending_records(s, workspace=workspace, key=audit_key),
                workspace=EVERY_WORKSPACE,
            )
        except DatabaseUnavailableError as error:
            # A store served read-only (or down) is no reason not to start: the requests it
            # refuses are told why, and the next start moves the rows.
            log.error("the rows from before workspaces were not moved now: %s", error)
            return
        if moved:
            log.info("%d stored row(s) are now workspace %s's", moved, workspace.team_id)


@dataclass
class Runtime:
    """The worker pool (`concurrency` debates at once; none at 0), the delivery loop when there
    is one, and the scheduler when there is one. With `exit_when_idle` the pool ends once no
    debate is left to claim. `slack_http`, the process's pooled Slack session, is closed last
    when it stops."""

    worker: DebateWorker
    concurrency: int
    delivery: OutboxDelivery | None = None
    scheduler: AsyncIOScheduler | None = None
    grace_s: float = 10.0
    exit_when_idle: bool = False
    slack_http: aiohttp.ClientSession | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _pool: asyncio.Task[None] | None = None
    _delivering: asyncio.Task[None] | None = None

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the runtime stops: what work run beside it (`background`) ends on."""
        return self._stop

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the runtime; `stop` waits for it like for the worker pool."""
        self._tasks.append(asyncio.create_task(work))

    async def start(self) -> None:
        """Start the pool, the delivery loop and the scheduler (inside the loop)."""
        self._stop.clear()
        self._tasks = []
        self._pool = None
        if self.concurrency > 0:
            pool = self.worker.run_pool(
                self._stop, concurrency=self.concurrency, exit_when_idle=self.exit_when_idle
            )
            self._pool = asyncio.create_task(pool)
            self._tasks.append(self._pool)
        if self.delivery is not None:
            self._delivering = asyncio.create_task(self.delivery.run_forever(self._stop))
        if self.scheduler is not None:
            self.scheduler.start()

    async def run_until(self, stop: asyncio.Event) -> None:
        """Until `stop` is set or, with `exit_when_idle`, the pool has run out of debates (then
        what they owe is delivered before it returns)."""
        stopping = asyncio.ensure_future(stop.wait())
        waits: list[asyncio.Future[Any]] = [stopping]
        if self.exit_when_idle and self._pool is not None:
            waits.append(self._pool)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if self.exit_when_idle and self.delivery is not None:
            await self.delivery.drain()

    async def stop(self, *, also: Awaitable[None] | None = None) -> None:
        """Stop claiming, give running turns `grace_s` to finish (each debate then hands its
        lease back, so another process resumes it at once), then cancel what still runs; owed
        messages stay in the outbox for the next process. `also` (other work stopping within
        the same grace) ends before the Slack session is closed."""
        self._stop.set()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        if self._tasks:
            _, running = await asyncio.wait(self._tasks, timeout=self.grace_s)
            for task in running:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._delivering is not None:
            await asyncio.gather(self._delivering, return_exceptions=True)
        if also is not None:
            await also
        if self.slack_http is not None:
            await self.slack_http.close()


@dataclass
class BotRuntime:
    """Everything `debatebot serve` runs in one process: the Bolt app and its ASGI front, the
    use cases the listeners reach, and the shared runtime."""

    app: AsyncApp
    asgi: BotASGI
    surfaces: Surfaces
    directory: SlackDirectory | None
    """The bot token's own directory, with one workspace (None with OAuth installs)."""
    after_ack: AfterAck
    """The work in flight after acknowledgements, every workspace's surface's."""
    notifier: DebateNotifier
    metrics: Metrics
    jobs: ScheduledJobs
    work: Runtime
    held: HeldEvents | None = None
    """The events kept for later, replayed by this process when they may be."""

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        self.work.background(work)

    async def start(self) -> None:
        await self.work.start()
        self.background(self._learn_bot_identity())
        if self.held is not None:
            self.background(self.held.run_forever(self.work.stopping))

    async def _learn_bot_identity(self) -> None:
        """Until Slack answers `auth.test` (Bolt's authorization reads the bot's id from the
        cache, `bot.slack.installs.local_authorize`), asking again less and less often."""
        directory = self.directory
        if directory is None:
            return
        wait = 1.0
        while directory.known_bot_user() is None:
            await directory.bot_identity()
            if directory.known_bot_user() is None:
                await asyncio.sleep(wait)
                wait = min(wait * 2, 60.0)

    async def stop(self) -> None:
        """The requests Slack was answered for finish within the same grace as the running
        turns (`bot.slack.after_ack`), before the store and Slack's session close."""
        draining = asyncio.ensure_future(self.after_ack.drain(self.work.grace_s))
        await self.work.stop(also=draining)
