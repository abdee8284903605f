"""The composition root: the one place that turns settings into working objects.

Nothing here runs at import time: the CLI calls these builders, and tests pass their own fakes
instead. Slack, uvicorn and APScheduler are imported by the functions that build them, so a
command that needs none of them (`run`, `audit`, `--help`) starts without paying for them.
The builders of Slack's side (`build_bot`, `build_worker_runtime`) run inside the event loop:
they make the process's one pooled Slack session, which the runtime closes when it stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from bot.health import HealthProbe
from bot.hosts.clients import HostClients
from bot.hosts.links import HostConfig
from bot.intake.deployment import deployment_intake
from bot.intake.intake import Intake
from bot.intake.policy import SpecPolicy
from bot.jobs.notifier import DebateNotifier
from bot.jobs.pr_comments import PullRequestComments
from bot.jobs.worker import DebateReporter, DebateWorker, SinkFactory, WorkerConfig
from bot.metrics import Metrics
from bot.providers import ProviderRegistry
from bot.receipting import public_keys_of, receipt_issuer
from bot.runtime import BotRuntime, Runtime
from bot.secrets import SlackOAuth
from bot.settings import Settings, SettingsError
from bot.slackweb.token import TokenGate
from bot.store.channels import ChannelDefaults
from bot.store.db import ensure_schema, make_engine
from bot.store.refusals import Backoff
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from engine.calibration.sampling import ReviewSampler
from engine.catalog import ModelRetiredError
from engine.ledger import LLMResolver
from engine.prompts import PromptLibrary
from engine.protocols import protocol_names

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import aiohttp
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.jobs.delivery import OutboxDelivery
    from bot.jobs.scheduled import ScheduledJobs
    from bot.slack.admission import Reach
    from bot.slackweb.installations import DatabaseInstallationStore
    from bot.slackweb.poster import SlackPoster


@dataclass
class DebateServices:
    settings: Settings
    prompts: PromptLibrary
    resolve_llm: LLMResolver

    registry: ProviderRegistry
    hosts: HostClients
    policy: SpecPolicy

    async def aclose(self) -> None:
        """Close what the services opened: the providers' and the code hosts' HTTP clients."""
        await self.hosts.aclose()
        await self.registry.aclose()


@contextlib.contextmanager
def open_store(settings: Settings, *, serving: bool = False) -> Iterator[Engine]:
    """The database engine at the current schema (SQLite migrates itself in a folder that
    exists; PostgreSQL needs `debatebot db upgrade`), disposed of when the block ends; with
    `serving`, a SQLite file the bot cannot write is served read-only (`ensure_schema`)."""
    engine = make_engine(settings.database_url, busy_timeout_s=settings.database_timeout_s)
    try:
        ensure_schema(engine, serving=serving)
        yield engine
    finally:
        engine.dispose()


def build_worker(
    services: DebateServices,
    engine: Engine,
    *,
    worker_id: str | None = None,
    reporter: DebateReporter | None = None,
    sinks: SinkFactory | None = None,
    metrics: Metrics | None = None,
    gate: TokenGate | None = None,
) -> DebateWorker:
    """A worker on `engine`; its pool's turns and endings are committed in groups (see
    bot.store.writer). With `gate`, it claims no new debate while Slack refuses the bot
    token (with OAuth installs the claims themselves skip a workspace whose token Slack
    refuses: bot.store.refusals)."""
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
            review_sample=ReviewSampler(settings.review_sample_rate),
            receipts=receipt_issuer(settings, services.registry),
        ),
        reporter=reporter,
        sinks=sinks,
        metrics=metrics,
        followers=[PullRequestComments(engine, services.hosts).after_finish],
        may_claim=(lambda: not gate.refused) if gate is not None else (lambda: True),
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
        policy=SpecPolicy(settings, registry),
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


def build_bot(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    client: AsyncWebClient | None = None,
) -> BotRuntime:
    """Wire the Slack app: client, delivery loop, notifier, intake, the listeners' use cases,
    workers and scheduled jobs, all on one pooled Slack session (made here, inside the running
    loop; `BotRuntime.stop` closes it); with DEBATEBOT_SLACK_CLIENT_ID and _SECRET, OAuth
    installs (`build_installs`). Raises SettingsError when a Slack secret is missing or a
    placeholder."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from slack_bolt.async_app import AsyncApp

    from bot.outbound import Outbound
    from bot.slack.after_ack import AfterAck
    from bot.slack.channel_config import ChannelConfig
    from bot.slack.held import HeldEvents
    from bot.slack.home import AppHome
    from bot.slack.installs import Uninstalls, local_authorize
    from bot.slack.installs import register as register_uninstalls
    from bot.slack.listeners import acknowledging
    from bot.slack.listeners import register as register_listeners
    from bot.slack.reviews import Reviews
    from bot.slack.server import BotASGI
    from bot.slack.starts import DebateStarts
    from bot.slack.surface import Surface, Surfaces
    from bot.slackweb.files import Uploads
    from bot.slackweb.people import SlackDirectory
    from bot.slackweb.poster import SlackPoster

    token, signing_secret, app_token = settings.slack_secrets()
    metrics = Metrics()
    http = slack_session(settings)
    oauth = settings.slack_oauth()
    installs = (
        build_installs(settings, oauth, engine, metrics, http=http) if oauth is not None else None
    )
    # One workspace: its token's refusal pauses everything (TokenGate). Many: each call is made
    # with its own workspace's token, and a refusal holds only that workspace.
    gate = TokenGate() if installs is None else None
    if installs is not None:
        client = client or installs.delivery_client
    else:
        assert token is not None
        client = client or slack_client(settings, metrics, gate, session=http)
    owner = process_name()
    delivery = build_delivery(
        settings, engine, client, owner=owner, gate=gate, per_workspace=installs is not None
    )
    directory = delivery.directory
    app = AsyncApp(
        signing_secret=signing_secret or "socket-mode-signs-nothing",
        request_verification_enabled=app_token is None,
        # Bolt answers Slack as soon as a listener returns, which each does once it has
        # acknowledged (bot.slack.after_ack), instead of polling for `ack()` every 10 ms.
        process_before_response=True,
        **(
            installs.app_options
            if installs is not None
            else {"client": client, "authorize": local_authorize(token or "", directory)}
        ),
    )
    held = HeldEvents(
        engine=engine,
        owner=owner,
        gate=gate,
        backoff=Backoff(settings.slack_token_probe_s, settings.slack_token_probe_max_s),
        poll_s=settings.outbox_poll_s,
        retry_s=settings.slack_event_retry_s,
        wake_delivery=delivery.wake,
        app=app,
    )
    notifier = build_notifier(settings, engine, wake=delivery.wake)
    worker = build_worker(
        services,
        engine,
        worker_id=f"{owner}/serve",
        reporter=notifier,
        metrics=metrics,
        gate=gate,
    )

    def wake() -> None:
        worker.wake()
        notifier.wake()

    # One for the process: the work in flight after acknowledgements, whatever the workspace.
    after_ack = AfterAck()

    def surface_for(workspace: Workspace, request_client: AsyncWebClient | None) -> Surface:
        """The use cases of one workspace, on its own token's client (OAuth installs: the one
        Bolt authorized for the request) or the bot's."""
        web = request_client or client
        people = directory if request_client is None else SlackDirectory(web)
        intake = build_intake(
            settings,
            services,
            engine,
            workspace=workspace,
            reach=people,
            wake=wake,
            gate=gate,
            tokens_per_workspace=installs is not None,
        )
        reviews = Reviews(
            engine=engine,
            intake=intake,
            notifier=notifier,
            directory=people,
            allow_self_review=settings.allow_self_review,
            metrics=metrics,
            after_review=PullRequestComments(engine, services.hosts).after_review,
            workspace=workspace,
            receipts=receipt_issuer(settings, services.registry),
        )
        return Surface(
            engine=engine,
            poster=(
                delivery.poster
                if request_client is None
                else SlackPoster(web, interval_s=settings.post_interval_s)
            ),
            directory=people,
            starts=DebateStarts(
                engine=engine,
                intake=intake,
                client=web,
                directory=people,
                hosts=services.hosts,
                uploads=Uploads(
                    files_url=settings.slack_files_url,
                    timeout_s=settings.slack_timeout_s,
                    http=Outbound(timeout_s=settings.slack_timeout_s, session=http),
                ),
                workspace=workspace,
            ),
            reviews=reviews,
            home=AppHome(
                engine=engine,
                directory=people,
                reviews=reviews,
                calibration_target=settings.calibration_target,
                calibration_min_labels=settings.calibration_min_labels,
                workspace=workspace,
            ),
            channels=ChannelConfig(
                engine=engine,
                directory=people,
                workspace=workspace,
                defaults=ChannelDefaults(
                    rounds=settings.rounds, threshold=settings.escalation_threshold
                ),
            ),
            protocols=protocol_names(),
            workspace=workspace,
            slack_http=http,
            after_ack=after_ack,
            held=held,
        )

    surfaces = Surfaces(surface_for)
    scheduler = AsyncIOScheduler(timezone="UTC")
    jobs = build_jobs(
        settings,
        engine,
        notifier,
        runner=owner,
        poster=delivery.poster,
        metrics=metrics,
        hosts=services.hosts,
    )
    jobs.schedule(scheduler)
    runtime = BotRuntime(
        app=app,
        asgi=BotASGI(
            app,
            health=HealthProbe(
                engine, settings.worker_concurrency, gate=gate, workspaces=installs is not None
            ),
            metrics=metrics,
            signing_secret=signing_secret or "socket-mode-signs-nothing",
            after_ack=after_ack,
            public_keys=public_keys_of(settings),
        ),
        surfaces=surfaces,
        directory=directory if installs is None else None,
        after_ack=after_ack,
        held=held,
        notifier=notifier,
        metrics=metrics,
        jobs=jobs,
        work=Runtime(
            worker=worker,
            concurrency=settings.worker_concurrency,
            delivery=delivery,
            scheduler=scheduler,
            grace_s=settings.shutdown_grace_s,
            slack_http=http,
        ),
    )
    register_listeners(app, surfaces, installs=installs is not None)
    register_uninstalls(
        app,
        Uninstalls(engine=engine, store=installs.store if installs is not None else None),
        wrap=acknowledging,
    )
    return runtime


def build_intake(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    workspace: Workspace,
    reach: Reach | None = None,
    wake: Callable[[], None] = lambda: None,
    gate: TokenGate | None = None,
    tokens_per_workspace: bool = False,
) -> Intake:
    """The one intake, with the deployment's limits, caps and review channel; with `gate`, it
    refuses new debates while Slack refuses the bot token, and with `tokens_per_workspace`
    (OAuth installs) while the store says Slack refuses the workspace's."""
    from bot.slack.admission import SlackDoorChecks

    checks = SlackDoorChecks(
        engine=engine,
        workspace=workspace,
        reach=reach,
        gate=gate,
        tokens_per_workspace=tokens_per_workspace,
    )
    return deployment_intake(
        settings, services.policy, engine, workspace=workspace, wake=wake, checks=checks
    )


def build_worker_runtime(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    name: str,
    concurrency: int,
    metrics: Metrics,
    exit_when_idle: bool = False,
) -> Runtime:
    """What `debatebot worker` runs: the pool and, with the bot token, the delivery loop on a
    pooled Slack session (made here, inside the running loop; `Runtime.stop` closes it); the
    scheduled jobs unless it exits when idle."""
    oauth = settings.slack_oauth()
    gate: TokenGate | None = None
    delivery: OutboxDelivery | None = None
    http: aiohttp.ClientSession | None = None
    if oauth is not None:
        http = slack_session(settings)
        installs = build_installs(settings, oauth, engine, metrics, http=http)
        delivery = build_delivery(settings, engine, installs.delivery_client, per_workspace=True)
    elif settings.slack_bot_token:
        gate = TokenGate()
        http = slack_session(settings)
        client = slack_client(settings, metrics, gate, session=http)
        delivery = build_delivery(settings, engine, client, gate=gate)
    notifier = build_notifier(settings, engine, wake=delivery.wake if delivery else (lambda: None))
    worker = build_worker(
        services, engine, worker_id=name, reporter=notifier, metrics=metrics, gate=gate
    )
    scheduler = None
    if not exit_when_idle:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        scheduler = AsyncIOScheduler(timezone="UTC")
        jobs = build_jobs(
            settings,
            engine,
            notifier,
            runner=name,
            poster=delivery.poster if delivery is not None else None,
            metrics=metrics,
            hosts=services.hosts,
        )
        jobs.schedule(scheduler)
    return Runtime(
        worker=worker,
        concurrency=concurrency,
        delivery=delivery,
        scheduler=scheduler,
        grace_s=settings.shutdown_grace_s,
        exit_when_idle=exit_when_idle,
        slack_http=http,
    )


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
    """The scheduled jobs of a `serve` or `worker` process (bot.jobs.scheduled); the digest needs
    `poster` (the bot token), the pull request comments' retry `hosts`."""
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


@dataclass
class Installs:
    """OAuth installs (bot.slack.installs): their store, and what the Bolt app takes to serve
    them (its client, install flow and authorization)."""

    store: DatabaseInstallationStore
    app_options: dict[str, Any]
    delivery_client: AsyncWebClient
    """The client the delivery loop and jobs call with: each call carries the token of the
    workspace it is made for (bot.slackweb.acting)."""


def build_installs(
    settings: Settings,
    oauth: SlackOAuth,
    engine: Engine,
    metrics: Metrics | None = None,
    *,
    http: aiohttp.ClientSession | None = None,
) -> Installs:
    """The install flow, the stores on `engine` and the per-workspace authorization, on the
    process's pooled Slack session (`http`). Raises SettingsError when
    DEBATEBOT_TOKEN_ENCRYPTION_KEY does not open the tokens already stored."""
    from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator

    from bot.slack.installs import NOT_INSTALLED, StoredAuthorize, authorize_url, oauth_flow
    from bot.slackweb.acting import WorkspaceClient
    from bot.slackweb.installations import DatabaseInstallationStore, DatabaseStateStore
    from bot.slackweb.poster import MeteredWebClient, classify
    from bot.slackweb.rotation import BotTokens
    from bot.store.cipher import TokenCipher
    from bot.store.db import session_scope
    from bot.store.errors import TokenDecryptError
    from bot.store.installations import check_key

    cipher = TokenCipher(*oauth.encryption_keys)
    try:
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            check_key(session, cipher=cipher)
    except TokenDecryptError as error:
        raise SettingsError(str(error)) from error

    def failed(method: str, raised: Exception) -> None:
        if metrics is not None:
            metrics.slack_errors.labels(method, classify(raised, method, "-").code).inc()

    # No token: each request gets its workspace's (Bolt copies this client's address, timeout
    # and session into the client it hands listeners), and the flow's calls carry the client id
    # and secret.
    client = MeteredWebClient(
        on_error=failed,
        base_url=settings.slack_api_url,
        timeout=int(max(1, settings.slack_timeout_s)),
        session=http,
    )
    store = DatabaseInstallationStore(engine=engine, cipher=cipher)
    tokens = BotTokens(
        store=store,
        rotator=AsyncTokenRotator(
            client_id=oauth.client_id, client_secret=oauth.client_secret, client=client
        ),
    )
    flow = oauth_flow(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        redirect_uri=oauth.redirect_uri,
        authorization_url=authorize_url(settings.slack_api_url),
        client=client,
        store=store,
        states=DatabaseStateStore(engine=engine),
        engine=engine,
    )
    return Installs(
        store=store,
        delivery_client=WorkspaceClient(
            tokens=tokens,
            on_error=failed,
            base_url=settings.slack_api_url,
            timeout=int(max(1, settings.slack_timeout_s)),
            session=http,
        ),
        app_options={
            "client": client,
            "oauth_flow": flow,
            "authorize": StoredAuthorize(tokens),
            "user_facing_authorize_error_message": NOT_INSTALLED,
        },
    )


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def slack_session(settings: Settings) -> aiohttp.ClientSession:
    """The process's one HTTP session to Slack, shared by the Web API client (the bot's calls,
    Bolt's, the OAuth code exchange and token rotation), the `response_url` answers and the file
    downloads: at most DEBATEBOT_SLACK_CONNECTIONS connections, kept alive between calls, each
    call bounded by DEBATEBOT_SLACK_TIMEOUT_S, no redirect followed (a 3xx is an OutboundError
    naming where it pointed). Made inside the running loop; its owner closes it.

    slack_sdk's clients use a session they are given and never close it ("use_running_session"
    in `_request_with_session`); without one they open and close a session, so a connection
    and a TLS handshake, per call. They apply their own `timeout` only to sessions they make,
    so the session carries the deadline."""
    from bot.outbound import pooled_session

    return pooled_session(
        connections=settings.slack_connections, timeout_s=settings.slack_timeout_s
    )


def slack_client(
    settings: Settings,
    metrics: Metrics | None = None,
    gate: TokenGate | None = None,
    *,
    session: aiohttp.ClientSession,
) -> AsyncWebClient:
    """The Web API client on `session` (`slack_session`, which follows no redirect; the client
    makes no call once it is closed); with `metrics`, every failed call is counted by method
    and code, and with `gate`, any call Slack answers by refusing the bot token (Bolt's own too)
    tells it."""
    from bot.slackweb.poster import MeteredWebClient, classify, token_refusal

    def failed(method: str, raised: Exception) -> None:
        if metrics is not None:
            metrics.slack_errors.labels(method, classify(raised, method, "-").code).inc()
        refused = token_refusal(raised, method)
        if gate is not None and refused is not None:
            gate.refuse(refused)

    return MeteredWebClient(
        on_error=failed,
        token=settings.slack_bot_token_value(),
        base_url=settings.slack_api_url,
        timeout=int(max(1, settings.slack_timeout_s)),
        session=session,
    )


def build_notifier(
    settings: Settings, engine: Engine, *, wake: Callable[[], None] = lambda: None
) -> DebateNotifier:
    """What a debate owes Slack, as outbox rows: every worker writes them (no token needed),
    and whichever process delivers (`serve`, or a worker with a bot token) sends them."""
    return DebateNotifier(engine=engine, deadline_s=settings.outbox_deadline_h * 3600, wake=wake)


def build_delivery(
    settings: Settings,
    engine: Engine,
    client: AsyncWebClient,
    *,
    owner: str | None = None,
    gate: TokenGate | None = None,
    per_workspace: bool = False,
) -> OutboxDelivery:
    """The loop that sends owed messages to Slack with `client` (`slack_client`, or with OAuth
    installs `per_workspace` a WorkspaceClient: each message with its workspace's token); `gate`
    is the process's view of the bot token."""
    from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
    from bot.slackweb.people import SlackDirectory
    from bot.slackweb.poster import SlackPoster

    return OutboxDelivery(
        gate=gate,
        engine=engine,
        poster=SlackPoster(client, interval_s=settings.post_interval_s),
        directory=SlackDirectory(client),
        owner=owner or process_name(),
        config=DeliveryConfig(
            poll_s=settings.outbox_poll_s,
            claim_s=settings.slack_timeout_s * 2 + 5,
            backoff_max_s=settings.outbox_backoff_max_s,
            status_interval_s=settings.outbox_status_interval_s,
            stream_interval_s=settings.outbox_stream_interval_s,
            token_probe_s=settings.slack_token_probe_s,
            token_probe_max_s=settings.slack_token_probe_max_s,
            per_workspace=per_workspace,
        ),
    )


def check_configured_models(services: DebateServices) -> None:
    """At start-up: the configured models' lifecycle. A retired one stops the process with
    SettingsError naming its replacement (every debate would fail); a deprecated one is logged
    once, with its retirement date and replacement."""
    try:
        notes = services.registry.lifecycle(services.policy.models())
    except ModelRetiredError as error:
        raise SettingsError(str(error)) from error
    for note in notes:
        log.warning("deprecated model: %s", note)
