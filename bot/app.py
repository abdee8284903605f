"""The composition root: the one place that turns settings into working objects.

Nothing here runs at import time; `build_services(settings)` is called by the CLI (and later by
the Slack app and the workers), and tests pass their own fakes instead. Slack, uvicorn and
APScheduler are imported by the functions that build them, so a command that needs none of them
(`run`, `worker`, `audit`, `--help`) starts without paying for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from bot.hosts import HostClients, HostConfig
from bot.jobs.pr_comments import PullRequestComments
from bot.jobs.worker import DebateReporter, DebateWorker, SinkFactory, WorkerConfig
from bot.messages.owed import DebateNotifier
from bot.metrics import Metrics
from bot.providers import ProviderRegistry, role_models
from bot.settings import RoleModel, Settings, SettingsError
from bot.store.db import ensure_schema, health, make_engine
from bot.store.repository import InFlightLimits, SpendCaps
from engine.catalog import ModelRetiredError
from engine.ledger import LLMResolver
from engine.models import (
    ADVERSARIAL_ROLES,
    ContextDocument,
    DebateSpec,
    ModelSettings,
    Participant,
    Role,
    fit_question,
)
from engine.prompts import PromptLibrary

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import uvicorn
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from slack_bolt.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.jobs.delivery import OutboxDelivery
    from bot.jobs.scheduled import ScheduledJobs
    from bot.slack.debates import SlackDebates
    from bot.slack.server import BotASGI
    from bot.slackweb.people import SlackDirectory
    from bot.slackweb.poster import SlackPoster


@dataclass
class DebateServices:
    settings: Settings
    prompts: PromptLibrary
    resolve_llm: LLMResolver

    registry: ProviderRegistry
    hosts: HostClients

    async def aclose(self) -> None:
        """Close what the services opened: the providers' clients and the code hosts' HTTP
        session."""
        await self.hosts.aclose()
        await self.registry.aclose()

    def models(
        self,
        provider: str | None = None,
        model: str | None = None,
        overrides: Mapping[str, RoleModel] | None = None,
    ) -> dict[str, ModelSettings]:
        """Every role's model under the settings and these overrides (see bot.providers)."""
        return role_models(
            self.settings,
            self.registry.catalog,
            provider=provider,
            model=model,
            overrides=overrides,
        )

    def new_spec(
        self,
        question: str,
        *,
        context: list[ContextDocument] | None = None,
        protocol: str = "adversarial",
        rounds: int | None = None,
        default_rounds: int | None = None,
        budget_usd: float | None = None,
        threshold: float | None = None,
        provider: str | None = None,
        model: str | None = None,
        overrides: Mapping[str, RoleModel] | None = None,
        stances_for: Sequence[str] = (),
        stances_against: Sequence[str] = (),
        route: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> DebateSpec:
        """A spec with the configured defaults and each role's model written into it (so the
        record says who spoke on what). An overlong question becomes the first document
        (`fit_question`). `default_rounds` is the channel's adversarial round count; `route`
        gives a panel its fast-model router (the framing model). Raises pydantic's
        ValidationError on bad input and SettingsError on a bad model configuration."""
        models = self.models(provider, model, overrides)
        try:
            self.registry.refuse_retired(models)
        except ModelRetiredError as error:
            raise SettingsError(str(error)) from error
        debaters = [
            Participant(
                role=Role.DEBATER,
                name=name,
                stance=stance,
                role_hint=hint,
                model=models["debaters"],
            )
            for name, stance, hint in default_debaters(protocol, stances_for, stances_against)
        ]
        router = [Participant(role=Role.ROUTER, model=models["framing"])] if route else []
        question, documents = fit_question(question, list(context or []))
        return DebateSpec(
            question=question,
            protocol=protocol,
            context=documents,
            max_rounds=rounds_for(protocol, rounds, default_rounds or self.settings.rounds),
            options=dict(options or {}),
            budget_usd=budget_usd if budget_usd is not None else self.settings.budget_usd,
            escalation_threshold=(
                threshold if threshold is not None else self.settings.escalation_threshold
            ),
            participants=[
                *(Participant(role=role, model=models[role.value]) for role in ADVERSARIAL_ROLES),
                Participant(role=Role.JUDGE, model=models["judge"]),
                Participant(role=Role.SYNTHESIZER, model=models["judge"]),
                Participant(role=Role.TRIAGE, model=models["framing"]),
                *debaters,
                *router,
            ],
            default_model=models["debaters"],
        )


DEFAULT_ROUNDS = {"adversarial": 1, "stances": 2, "consensus": 2, "structured": 1, "panel": 3}


def rounds_for(protocol: str, asked: int | None, configured: int) -> int:
    """The one place a debate's round count is decided: as asked, else the configured count
    (the channel's or the deployment's) for adversarial debates, else the protocol's default.
    The configured count is an adversarial one; the other protocols end by their own rule."""
    if asked is not None:
        return asked
    if protocol == "adversarial":
        return configured
    return DEFAULT_ROUNDS.get(protocol, 1)


DEFAULT_DEBATERS: dict[str, list[tuple[str, str | None, str | None]]] = {
    "consensus": [
        ("planner", None, "You plan the change and own its delivery."),
        ("critic", None, "You look for what will break and who gets hurt."),
        ("operator", None, "You will run this in production at 3 a.m."),
    ],
    "panel": [
        ("architect", None, "Judge it as the system's architect."),
        ("security", None, "Judge it as the security reviewer."),
        ("operator", None, "Judge it as the on-call engineer who runs it."),
    ],
}


def default_debaters(
    protocol: str, stances_for: Sequence[str], stances_against: Sequence[str]
) -> list[tuple[str, str | None, str | None]]:
    """(name, stance, role hint) of the debaters a protocol gets when the request names none:
    stances from --for/--against (named for-1, against-1, …), fixed panels otherwise."""
    if stances_for or stances_against:
        return [
            (f"{side}-{n}", stance, None)
            for side, stances in (("for", stances_for), ("against", stances_against))
            for n, stance in enumerate(stances, 1)
        ]
    return list(DEFAULT_DEBATERS.get(protocol, []))


@contextlib.contextmanager
def open_store(settings: Settings) -> Iterator[Engine]:
    """The database engine at the current schema (SQLite migrates itself, and creates its file
    in a folder that exists; PostgreSQL must have had `debatebot db upgrade`), disposed of when
    the block ends."""
    engine = make_engine(settings.database_url, busy_timeout_s=settings.database_timeout_s)
    try:
        ensure_schema(engine)
        yield engine
    finally:
        engine.dispose()


@contextlib.contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """For a long-running command: what start-up built (modules, mappers, schemas, prompts) is
    kept out of the garbage collector's view until the block ends.

    That heap lives as long as the process, yet a full collection walks all of it: 25-57 ms
    holding the interpreter lock, which landed while a pool was launching its first model
    calls (200 debates on PostgreSQL: 1.33 s with it frozen, 1.38 s without). What start-up left as
    garbage is frozen with it and freed only when the block ends: about 9,000 objects, once.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def build_worker(
    services: DebateServices,
    engine: Engine,
    *,
    worker_id: str | None = None,
    reporter: DebateReporter | None = None,
    sinks: SinkFactory | None = None,
    metrics: Metrics | None = None,
) -> DebateWorker:
    """A worker on `engine`; its pool's turns and endings are committed in groups (see
    bot.store.writer)."""
    settings = services.settings
    return DebateWorker(
        engine=engine,
        resolve_llm=services.resolve_llm,
        prompts=services.prompts,
        worker_id=worker_id,
        config=WorkerConfig(
            lease_s=settings.worker_lease_s,
            heartbeat_s=settings.worker_heartbeat_s,
            poll_s=settings.worker_poll_s,
            audit_key=settings.audit_key_bytes(),
        ),
        reporter=reporter,
        sinks=sinks,
        metrics=metrics,
        followers=[PullRequestComments(engine, services.hosts).after_finish],
    )


def build_services(settings: Settings, *, resolve_llm: LLMResolver | None = None) -> DebateServices:
    """Load and verify the prompts and set up the providers; fails fast on tampered prompts.
    `resolve_llm` replaces the providers (tests and benchmarks pass their fakes here)."""
    registry = ProviderRegistry(settings)
    return DebateServices(
        settings=settings,
        prompts=PromptLibrary.load(settings.prompts_dir),
        resolve_llm=resolve_llm or registry.resolve,
        registry=registry,
        hosts=HostClients(host_config(settings)),
    )


def host_config(settings: Settings) -> HostConfig:
    """Where linked ADRs are fetched from, with which tokens (placeholders refused)."""
    return HostConfig(
        github_url=settings.github_url,
        github_token=settings.host_token("github"),
        gitlab_url=settings.gitlab_url,
        gitlab_token=settings.host_token("gitlab"),
        github_api_url=settings.github_api_url,
        gitlab_api_url=settings.gitlab_api_url,
        timeout_s=settings.host_timeout_s,
    )


@dataclass
class BotRuntime:
    """Everything `debatebot serve` runs in one process: Bolt app, the debate worker pool, the
    delivery loop and the scheduler."""

    app: AsyncApp
    asgi: BotASGI
    debates: SlackDebates
    notifier: DebateNotifier
    delivery: OutboxDelivery
    worker: DebateWorker
    concurrency: int
    metrics: Metrics
    jobs: ScheduledJobs
    scheduler: AsyncIOScheduler
    grace_s: float = 10.0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _delivering: asyncio.Task[None] | None = None

    def wake_workers(self) -> None:
        self.worker.wake()

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the runtime; `stop` waits for it like for the worker pool."""
        self._tasks.append(asyncio.create_task(work))

    async def start(self) -> None:
        """Start the worker pool (`concurrency` debates at once; none at 0), the delivery loop
        and the scheduler (inside the loop)."""
        self._stop.clear()
        self._tasks = []
        if self.concurrency > 0:
            pool = self.worker.run_pool(self._stop, concurrency=self.concurrency)
            self._tasks.append(asyncio.create_task(pool))
        self._delivering = asyncio.create_task(self.delivery.run_forever(self._stop))
        self._tasks.append(asyncio.create_task(self._learn_bot_identity()))
        self.scheduler.start()

    async def _learn_bot_identity(self) -> None:
        await self.delivery.directory.bot_identity()

    async def stop(self) -> None:
        """Stop claiming, give running turns `grace_s` to finish (each debate then hands its
        lease back, so another process resumes it at once), then cancel what still runs; owed
        messages stay in the outbox for the next process."""
        self._stop.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        if self._tasks:
            _, running = await asyncio.wait(self._tasks, timeout=self.grace_s)
            for task in running:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._delivering is not None:
            await asyncio.gather(self._delivering, return_exceptions=True)


def build_bot(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    client: AsyncWebClient | None = None,
) -> BotRuntime:
    """Wire the Slack app: client, poster, notifier, delivery loop, listeners, workers and
    scheduled jobs. Raises SettingsError when a Slack secret is missing or a placeholder."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from slack_bolt.async_app import AsyncApp

    from bot.slack.debates import SlackDebates
    from bot.slack.listeners import register as register_listeners
    from bot.slack.server import BotASGI
    from bot.slackweb.files import Uploads

    token, signing_secret, app_token = settings.slack_secrets()
    metrics = Metrics()
    client = client or slack_client(settings, metrics)
    owner = process_name()
    delivery = build_delivery(settings, engine, client, owner=owner)
    app = AsyncApp(
        client=client,
        signing_secret=signing_secret or "socket-mode-signs-nothing",
        request_verification_enabled=app_token is None,
        process_before_response=False,
        authorize=local_authorize(token, delivery.directory),
    )
    notifier = build_notifier(settings, engine, wake=delivery.wake)
    worker = build_worker(
        services, engine, worker_id=f"{owner}/serve", reporter=notifier, metrics=metrics
    )
    concurrency = settings.worker_concurrency
    scheduler = AsyncIOScheduler(timezone="UTC")
    runtime = BotRuntime(
        app=app,
        asgi=BotASGI(
            app,
            health=HealthProbe(engine, concurrency),
            metrics=metrics,
            signing_secret=signing_secret or "socket-mode-signs-nothing",
        ),
        debates=SlackDebates(
            engine=engine,
            new_spec=services.new_spec,
            notifier=notifier,
            poster=delivery.poster,
            directory=delivery.directory,
            wake_workers=lambda: runtime.wake_workers(),
            limits=InFlightLimits(
                per_user=settings.max_debates_per_user,
                per_channel=settings.max_debates_per_channel,
            ),
            caps=SpendCaps(workspace_usd=settings.workspace_monthly_budget_usd),
            review_channel=settings.review_channel,
            allow_self_review=settings.allow_self_review,
            metrics=metrics,
            hosts=services.hosts,
            after_review=PullRequestComments(engine, services.hosts).after_review,
            uploads=Uploads(files_url=settings.slack_files_url, timeout_s=settings.slack_timeout_s),
        ),
        notifier=notifier,
        delivery=delivery,
        worker=worker,
        concurrency=concurrency,
        metrics=metrics,
        jobs=build_jobs(
            settings,
            engine,
            notifier,
            runner=owner,
            poster=delivery.poster,
            metrics=metrics,
            hosts=services.hosts,
        ),
        scheduler=scheduler,
        grace_s=settings.shutdown_grace_s,
    )
    runtime.jobs.schedule(scheduler)
    register_listeners(app, runtime.debates)
    return runtime


def build_jobs(
    settings: Settings,
    engine: Engine,
    notifier: DebateNotifier,
    *,
    runner: str,
    poster: SlackPoster | None = None,
    metrics: Metrics | None = None,
    hosts: HostClients | None = None,
) -> ScheduledJobs:
    """The scheduled jobs of a `serve` or `worker` process (see bot.jobs.scheduled); the
    digest needs `poster`, so only processes with the bot token send it, and the pull request
    comments' retry needs `hosts`."""
    from bot.jobs.scheduled import ScheduledJobs

    return ScheduledJobs(
        engine=engine,
        settings=settings,
        notifier=notifier,
        runner=runner,
        poster=poster,
        metrics=metrics,
        pr_comments=PullRequestComments(engine, hosts) if hosts is not None else None,
    )


def local_authorize(token: str, directory: SlackDirectory) -> Callable[..., Any]:
    """Bolt's authorization from what the bot already holds, with no Slack call per request.

    Bolt's default asks Slack (`auth.test`) before the first request is handled, so while
    Slack's Web API is down every `/debate` would be refused unqueued. The bot's user id comes
    from an `auth.test` made in the background and cached.
    """
    from slack_bolt.authorization import AuthorizeResult

    async def authorize(
        enterprise_id: str | None = None, team_id: str | None = None, **_: Any
    ) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            bot_token=token,
            bot_user_id=directory.known_bot_user(),
        )

    return authorize


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def slack_client(settings: Settings, metrics: Metrics | None = None) -> AsyncWebClient:
    """The Web API client; with `metrics`, every failed call is counted by method and code."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slackweb.poster import MeteredWebClient

    options: dict[str, Any] = {
        "token": settings.slack_bot_token_value(),
        "base_url": settings.slack_api_url,
        "timeout": int(max(1, settings.slack_timeout_s)),
    }
    if metrics is None:
        return AsyncWebClient(**options)
    errors = metrics.slack_errors
    return MeteredWebClient(on_error=lambda m, code: errors.labels(m, code).inc(), **options)


def build_notifier(
    settings: Settings, engine: Engine, *, wake: Callable[[], None] = lambda: None
) -> DebateNotifier:
    """What a debate owes Slack, as outbox rows: every worker writes them (no token needed),
    and whichever process delivers (`serve`, or a worker with a bot token) sends them."""
    return DebateNotifier(engine=engine, deadline_s=settings.outbox_deadline_h * 3600, wake=wake)


def build_delivery(
    settings: Settings,
    engine: Engine,
    client: AsyncWebClient | None = None,
    *,
    owner: str | None = None,
    metrics: Metrics | None = None,
) -> OutboxDelivery:
    """The loop that sends owed messages to Slack (needs the bot token)."""
    from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
    from bot.slackweb.people import SlackDirectory
    from bot.slackweb.poster import SlackPoster

    client = client or slack_client(settings, metrics)
    return OutboxDelivery(
        engine=engine,
        poster=SlackPoster(client, interval_s=settings.post_interval_s),
        directory=SlackDirectory(client),
        owner=owner or process_name(),
        config=DeliveryConfig(
            poll_s=settings.outbox_poll_s,
            claim_s=settings.slack_timeout_s * 2 + 5,
            backoff_max_s=settings.outbox_backoff_max_s,
            status_interval_s=settings.outbox_status_interval_s,
        ),
    )


def transport(settings: Settings) -> str:
    """`socket` when an app-level token is set (no public URL needed), else `http`."""
    return "socket" if settings.slack_app_token is not None else "http"


def check_configured_models(services: DebateServices) -> None:
    """At start-up: the configured models' lifecycle. A retired one stops the process with
    SettingsError naming its replacement (every debate would fail); a deprecated one is logged
    once, with its retirement date and replacement."""
    try:
        notes = services.registry.lifecycle(services.models())
    except ModelRetiredError as error:
        raise SettingsError(str(error)) from error
    for note in notes:
        log.warning("deprecated model: %s", note)


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run the bot until `stop` is set: Socket Mode or HTTP, with workers, delivery and
    scheduler. Raises SettingsError when Slack refuses the app-level token for good, or when
    a configured model is retired."""
    services = build_services(settings)
    check_configured_models(services)
    with open_store(settings) as engine, contextlib.ExitStack() as frozen:
        runtime = build_bot(settings, services, engine)
        exporter = None
        if settings.metrics_port is not None:
            exporter = serve_metrics(runtime.metrics, settings.http_host, settings.metrics_port)
        frozen.enter_context(startup_heap_frozen())
        await runtime.start()
        try:
            if transport(settings) == "socket":
                ops = _ops_server(settings, runtime)
                try:
                    await _serve_socket_mode(settings, runtime, stop)
                finally:
                    if ops is not None:
                        ops.should_exit = True
            else:
                await _serve_http(settings, runtime, stop)
        finally:
            await runtime.stop()
            await services.aclose()
            if exporter is not None:
                exporter.shutdown()


async def _serve_socket_mode(settings: Settings, runtime: BotRuntime, stop: asyncio.Event) -> None:
    from bot.slack.socket_mode import GuardedSocketModeHandler

    _, _, app_token = settings.slack_secrets()
    assert app_token is not None
    handler = GuardedSocketModeHandler(
        runtime.app, app_token, ping_interval_s=settings.socket_ping_s
    )
    client = handler.guarded
    connecting = asyncio.create_task(handler.connect_async())  # type: ignore[no-untyped-call]
    stopped = asyncio.create_task(stop.wait())
    refused = asyncio.create_task(client.refused.wait())
    try:
        await asyncio.wait([stopped, refused], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (connecting, stopped, refused):
            task.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await handler.close_async()  # type: ignore[no-untyped-call]
    if client.refused.is_set():
        raise SettingsError(
            f"Slack refused DEBATEBOT_SLACK_APP_TOKEN ({client.refusal}): create an app-level"
            " token with the connections:write scope (Basic Information -> App-Level Tokens)"
            " and set it, or unset it to serve over HTTP"
        )


def _ops_server(settings: Settings, runtime: BotRuntime) -> uvicorn.Server | None:
    """In Socket Mode, `/healthz` and `/metrics` on the HTTP port (for a container's health
    check and Prometheus), without the Slack route. A port already taken is logged, not fatal:
    the bot itself needs no port in Socket Mode."""
    import uvicorn

    from bot.slack.server import OpsASGI

    listener = socket.socket(socket.AF_INET6 if ":" in settings.http_host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((settings.http_host, settings.http_port))
    except OSError as error:
        listener.close()
        log.warning(
            "no /healthz or /metrics: port %s:%d is taken (%s); set DEBATEBOT_HTTP_PORT",
            settings.http_host,
            settings.http_port,
            error,
        )
        return None
    health = runtime.asgi.health
    server = uvicorn.Server(
        uvicorn.Config(OpsASGI(health, runtime.metrics), lifespan="off", log_level="warning")
    )
    runtime.background(server.serve(sockets=[listener]))
    return server


async def _serve_http(settings: Settings, runtime: BotRuntime, stop: asyncio.Event) -> None:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            runtime.asgi,
            host=settings.http_host,
            port=settings.http_port,
            lifespan="off",
            log_level="info",
        )
    )
    serving = asyncio.create_task(server.serve())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    server.should_exit = True
    await serving


def serve_metrics(metrics: Metrics, host: str, port: int) -> WSGIServer:
    """Prometheus' exposition of `metrics` on `host:port` (`/metrics`), in a thread of its own
    so a slow scrape never holds up the event loop. Its loop polls every 50 ms rather than
    prometheus-client's 0.5 s, so `shutdown()` does not hold a stopping process that long."""
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client import make_wsgi_app

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            """Scrapes are not worth a log line each."""

    try:
        server = make_server(
            host, port, make_wsgi_app(metrics.registry), Server, handler_class=QuietHandler
        )
    except OSError as error:
        raise SettingsError(
            f"cannot serve /metrics on {host}:{port} ({error.strerror}): choose a free port with"
            " --metrics-port or DEBATEBOT_METRICS_PORT"
        ) from error
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    log.info("metrics on http://%s:%d/metrics", host, port)
    return server


class HealthProbe:
    """What `/healthz` answers anyone: whether the database is usable (a missing or read-only
    SQLite file, a full disk, an unreachable server or an old schema is not) and how many
    debates this process runs at once, with no names, hosts or users in it.

    The check runs off the event loop and is bounded: a database that does not answer within
    `timeout_s` (under the image's 4-second probe) is reported `unavailable`. One check runs at
    a time: while one is stuck in a hung database, the next probes wait for it (still bounded)
    instead of each leaving a thread stuck in asyncio's shared executor, whose threads also
    resolve Slack's host name for every connection."""

    def __init__(self, engine: Engine, concurrency: int, *, timeout_s: float = 3.0) -> None:
        self.engine = engine
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
        return {"ok": problem is None, "database": problem or "ok", "concurrency": self.concurrency}
