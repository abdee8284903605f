"""The background work of a process, built from the settings: the worker pool, the notifier
that writes what a run owes to the outbox, the delivery loop that sends it, the scheduled jobs,
and `debatebot worker`'s runtime, which runs them without the Slack app."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from bot.hosts.clients import HostClients
from bot.jobs.notifier import DebateNotifier
from bot.jobs.pr_comments import PullRequestComments
from bot.jobs.sampling import review_sampler
from bot.jobs.worker import DebateReporter, DebateWorker, SinkFactory, WorkerConfig
from bot.metrics import Metrics
from bot.receipting import receipt_issuer
from bot.runtime import Runtime
from bot.settings import Settings
from bot.slackweb.token import TokenGate
from bot.wiring.services import DebateServices
from bot.wiring.slack_access import SlackAccess, slack_access

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.jobs.delivery import OutboxDelivery
    from bot.jobs.scheduled import ScheduledJobs
    from bot.slackweb.poster import SlackPoster


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


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
            review_sample=review_sampler(settings),
            receipts=receipt_issuer(settings, services.registry),
        ),
        reporter=reporter,
        sinks=sinks,
        metrics=metrics,
        followers=[PullRequestComments(engine, services.hosts).after_finish],
        may_claim=(lambda: not gate.refused) if gate is not None else (lambda: True),
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
    metrics: Metrics | None = None,
) -> OutboxDelivery:
    """The loop that sends owed messages to Slack with `client` (`slack_client`, or with OAuth
    installs `per_workspace` a WorkspaceClient: each message with its workspace's token); `gate`
    is the process's view of the bot token."""
    from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
    from bot.slackweb.people import SlackDirectory
    from bot.slackweb.poster import SlackPoster
    from bot.slackweb.sharing import FileShares

    poster = SlackPoster(client, interval_s=settings.post_interval_s)
    return OutboxDelivery(
        gate=gate,
        metrics=metrics,
        engine=engine,
        poster=poster,
        shares=FileShares.of(poster, settings.slack_files_url),
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


def delivery_for(
    settings: Settings,
    engine: Engine,
    access: SlackAccess,
    *,
    owner: str | None = None,
    metrics: Metrics | None = None,
) -> OutboxDelivery:
    """The delivery loop on a process's way to Slack: the bot token's client and its gate, or
    with OAuth installs each message with its own workspace's token."""
    return build_delivery(
        settings,
        engine,
        access.client,
        owner=owner,
        gate=access.gate,
        per_workspace=access.installs is not None,
        metrics=metrics,
    )


def scheduled_jobs(
    settings: Settings,
    engine: Engine,
    notifier: DebateNotifier,
    *,
    runner: str,
    poster: SlackPoster | None = None,
    metrics: Metrics | None = None,
    hosts: HostClients | None = None,
) -> tuple[ScheduledJobs, AsyncIOScheduler]:
    """The scheduled jobs of a `serve` or `worker` process (bot.jobs.scheduled), on the
    scheduler that runs them; the digest needs `poster` (the bot token), the pull request
    comments' retry `hosts`."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from bot.jobs.scheduled import ScheduledJobs

    scheduler = AsyncIOScheduler(timezone="UTC")
    jobs = ScheduledJobs(
        engine=engine,
        settings=settings,
        notifier=notifier,
        runner=runner,
        poster=poster,
        metrics=metrics,
        pr_comments=PullRequestComments(engine, hosts) if hosts is not None else None,
    )
    jobs.schedule(scheduler)
    return jobs, scheduler


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
    """What `debatebot worker` runs: the pool and, with the bot token or OAuth installs, the
    delivery loop on a pooled Slack session (made here, inside the running loop; `Runtime.stop`
    closes it); the scheduled jobs unless it exits when idle."""
    access = slack_access(settings, engine, metrics)
    gate = access.gate if access is not None else None
    delivery = (
        delivery_for(settings, engine, access, metrics=metrics) if access is not None else None
    )
    notifier = build_notifier(settings, engine, wake=delivery.wake if delivery else (lambda: None))
    worker = build_worker(
        services, engine, worker_id=name, reporter=notifier, metrics=metrics, gate=gate
    )
    scheduler = None
    if not exit_when_idle:
        _, scheduler = scheduled_jobs(
            settings,
            engine,
            notifier,
            runner=name,
            poster=delivery.poster if delivery is not None else None,
            metrics=metrics,
            hosts=services.hosts,
        )
    return Runtime(
        worker=worker,
        concurrency=concurrency,
        delivery=delivery,
        scheduler=scheduler,
        grace_s=settings.shutdown_grace_s,
        exit_when_idle=exit_when_idle,
        slack_http=access.http if access is not None else None,
    )
