"""What `debatebot serve` runs: the Bolt app with its listeners and front door, each
workspace's use cases, the kept events, and the worker pool, delivery loop and scheduled jobs
beside them. `build_bot` lists the parts; each is built by a function of its own here or in
the modules beside this one. Bolt, the Slack surface and APScheduler are imported by the
functions that build them (see bot.wiring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from bot.health import HealthProbe
from bot.metrics import Metrics
from bot.receipting import public_keys_of
from bot.runtime import BotRuntime, Runtime
from bot.settings import Settings
from bot.slackweb.token import TokenGate
from bot.store.refusals import Backoff
from bot.wiring.services import DebateServices
from bot.wiring.slack_access import SlackAccess, slack_access
from bot.wiring.work import (
    build_notifier,
    build_worker,
    delivery_for,
    process_name,
    scheduled_jobs,
)

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

    from bot.jobs.delivery import OutboxDelivery
    from bot.jobs.notifier import DebateNotifier
    from bot.slack.after_ack import AfterAck
    from bot.slack.held import HeldEvents
    from bot.slack.server import BotASGI
    from bot.slack.surface import Surfaces

SOCKET_MODE_SIGNS_NOTHING = "socket-mode-signs-nothing"
"""Bolt's signing secret over Socket Mode, where Slack signs no request (verification is off)."""


def build_bot(settings: Settings, services: DebateServices, engine: Engine) -> BotRuntime:
    """Wire the Slack app: client, delivery loop, notifier, intake, the listeners' use cases,
    workers and scheduled jobs, all on one pooled Slack session (made here, inside the running
    loop; `BotRuntime.stop` closes it); with DEBATEBOT_SLACK_CLIENT_ID and _SECRET, OAuth
    installs (`build_installs`). Raises SettingsError when a Slack secret is missing or a
    placeholder."""
    from bot.slack.after_ack import AfterAck

    token, signing_secret, app_token = settings.slack_secrets()
    metrics = Metrics()
    access = slack_access(settings, engine, metrics)
    assert access is not None, "slack_secrets() refuses a missing bot token"
    owner = process_name()
    delivery = delivery_for(settings, engine, access, owner=owner, metrics=metrics)
    app = bolt_app(access, delivery, token=token, signing_secret=signing_secret, socket=app_token)
    held = held_events(settings, engine, app, delivery, owner=owner, gate=access.gate)
    notifier = build_notifier(settings, engine, wake=delivery.wake)
    worker = build_worker(
        services,
        engine,
        worker_id=f"{owner}/serve",
        reporter=notifier,
        metrics=metrics,
        gate=access.gate,
    )
    # One for the process: the work in flight after acknowledgements, whatever the workspace.
    after_ack = AfterAck()
    surfaces = workspace_surfaces(
        settings,
        services,
        engine,
        metrics,
        access,
        delivery,
        notifier,
        wake=wake_both(worker.wake, notifier.wake),
        after_ack=after_ack,
        held=held,
    )
    jobs, scheduler = scheduled_jobs(
        settings,
        engine,
        notifier,
        runner=owner,
        poster=delivery.poster,
        metrics=metrics,
        hosts=services.hosts,
    )
    runtime = BotRuntime(
        app=app,
        asgi=front_door(settings, engine, app, access, metrics, after_ack, signing_secret),
        surfaces=surfaces,
        directory=delivery.directory if access.installs is None else None,
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
            slack_http=access.http,
        ),
    )
    attach_listeners(app, engine, surfaces, access)
    return runtime


def bolt_app(
    access: SlackAccess,
    delivery: OutboxDelivery,
    *,
    token: str | None,
    signing_secret: str | None,
    socket: str | None,
) -> AsyncApp:
    """The Bolt app: with OAuth installs, their client, install flow and authorization; else
    the bot's client, authorized from what the bot holds (`local_authorize`). Over Socket Mode
    (an app token, `socket`) Slack signs nothing, so nothing is verified."""
    from slack_bolt.async_app import AsyncApp

    from bot.slack.installs import local_authorize

    return AsyncApp(
        signing_secret=signing_secret or SOCKET_MODE_SIGNS_NOTHING,
        request_verification_enabled=socket is None,
        # Bolt answers Slack as soon as a listener returns, which each does once it has
        # acknowledged (bot.slack.after_ack), instead of polling for `ack()` every 10 ms.
        process_before_response=True,
        **(
            access.installs.app_options
            if access.installs is not None
            else {
                "client": access.client,
                "authorize": local_authorize(token or "", delivery.directory),
            }
        ),
    )


def held_events(
    settings: Settings,
    engine: Engine,
    app: AsyncApp,
    delivery: OutboxDelivery,
    *,
    owner: str,
    gate: TokenGate | None,
) -> HeldEvents:
    """The events kept while Slack refuses their workspace's token, replayed through `app`
    once it works (bot.slack.held)."""
    from bot.slack.held import HeldEvents

    return HeldEvents(
        engine=engine,
        owner=owner,
        gate=gate,
        backoff=Backoff(settings.slack_token_probe_s, settings.slack_token_probe_max_s),
        poll_s=settings.outbox_poll_s,
        retry_s=settings.slack_event_retry_s,
        wake_delivery=delivery.wake,
        app=app,
    )


def workspace_surfaces(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    metrics: Metrics,
    access: SlackAccess,
    delivery: OutboxDelivery,
    notifier: DebateNotifier,
    *,
    wake: Callable[[], None],
    after_ack: AfterAck,
    held: HeldEvents,
) -> Surfaces:
    """Each workspace's use cases, built on its first request (bot.wiring.surfaces)."""
    from bot.slack.surface import Surfaces
    from bot.wiring.surfaces import WorkspaceSurfaces

    return Surfaces(
        WorkspaceSurfaces(
            settings=settings,
            services=services,
            engine=engine,
            metrics=metrics,
            http=access.http,
            client=access.client,
            directory=delivery.directory,
            poster=delivery.poster,
            notifier=notifier,
            gate=access.gate,
            per_workspace=access.installs is not None,
            wake=wake,
            after_ack=after_ack,
            held=held,
        ).build
    )


def wake_both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    """One wake-up for two: a queued debate wakes the worker and the notifier."""

    def wake() -> None:
        first()
        second()

    return wake


def front_door(
    settings: Settings,
    engine: Engine,
    app: AsyncApp,
    access: SlackAccess,
    metrics: Metrics,
    after_ack: AfterAck,
    signing_secret: str | None,
) -> BotASGI:
    """The HTTP front door (bot.slack.server): Slack's requests, /healthz and /metrics."""
    from bot.slack.server import BotASGI

    return BotASGI(
        app,
        health=HealthProbe(
            engine,
            settings.worker_concurrency,
            gate=access.gate,
            workspaces=access.installs is not None,
        ),
        metrics=metrics,
        signing_secret=signing_secret or SOCKET_MODE_SIGNS_NOTHING,
        after_ack=after_ack,
        public_keys=public_keys_of(settings),
    )


def attach_listeners(
    app: AsyncApp, engine: Engine, surfaces: Surfaces, access: SlackAccess
) -> None:
    """The middleware, error handler and listeners (bot.slack.listeners), and the uninstall
    events' listeners (bot.slack.installs), each acknowledged first."""
    from bot.slack.acknowledgement import acknowledging
    from bot.slack.installs import Uninstalls
    from bot.slack.installs import register as register_uninstalls
    from bot.slack.listeners import register as register_listeners

    installs = access.installs
    register_listeners(app, surfaces, installs=installs is not None)
    register_uninstalls(
        app,
        Uninstalls(engine=engine, store=installs.store if installs is not None else None),
        wrap=acknowledging,
    )
