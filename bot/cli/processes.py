"""`debatebot worker` and `debatebot serve`: the long-running processes, stopped by SIGINT or
SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from bot import serving
from bot.logs import configure_logging
from bot.metrics import Metrics
from bot.receipting import check_receipt_keys
from bot.runtime import check_bot_token, startup_heap_frozen
from bot.settings import Settings, SettingsError
from bot.store.db import redacted
from bot.wiring import build_services, build_worker_runtime, check_configured_models, open_store


def _check_receipt_keys(settings: Settings) -> None:
    """Stop when the receipt keys cannot be trusted; warn when receipts will go unsigned."""
    warning = check_receipt_keys(settings)
    if warning is not None:
        logging.getLogger("bot.receipts").warning(warning)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def worker(args: argparse.Namespace) -> int:
    """Run debates (and, with the bot token, deliver what they owe) until stopped, or until the
    queue is empty with `--exit-when-idle`."""
    settings = Settings()
    configure_logging(settings)
    _check_receipt_keys(settings)
    services = build_services(settings)
    check_configured_models(services)
    stop = _stop_on_signals()
    concurrency = args.concurrency or settings.worker_concurrency
    if concurrency < 1:
        raise SettingsError(
            "DEBATEBOT_WORKER_CONCURRENCY=0 runs no debates (it is for a serve that leaves them"
            " to workers); a worker needs at least 1: set it, or pass --concurrency"
        )
    print(
        f"worker {args.name}: up to {concurrency} debate(s) at once on"
        f" {redacted(settings.database_url)}",
        file=sys.stderr,
    )
    metrics = Metrics()
    metrics_port = args.metrics_port or settings.metrics_port
    exporter = (
        serving.serve_metrics(metrics, settings.http_host, metrics_port) if metrics_port else None
    )
    try:
        with open_store(settings, serving=True) as engine, contextlib.ExitStack() as frozen:
            runtime = build_worker_runtime(
                settings,
                services,
                engine,
                name=args.name,
                concurrency=concurrency,
                metrics=metrics,
                exit_when_idle=args.exit_when_idle,
            )
            try:
                if runtime.delivery is not None and not runtime.delivery.config.per_workspace:
                    await check_bot_token(
                        runtime.delivery.directory, engine, audit_key=settings.audit_key_bytes()
                    )
                frozen.enter_context(startup_heap_frozen())
                await runtime.start()
                await runtime.run_until(stop)
            finally:
                await runtime.stop()
    finally:
        if exporter is not None:
            exporter.shutdown()
        await services.aclose()
    return 0


async def serve(args: argparse.Namespace) -> int:
    """The bot over Socket Mode or HTTP, with its workers, until stopped."""
    settings = Settings()
    settings.slack_secrets()
    configure_logging(settings)
    _check_receipt_keys(settings)
    stop = _stop_on_signals()
    mode = (
        "Socket Mode"
        if settings.slack_app_token is not None
        else (f"HTTP on {settings.http_host}:{settings.http_port} (/slack/events, /healthz)")
    )
    print(
        f"debatebot serving over {mode}; up to {settings.worker_concurrency} debate(s) at once on"
        f" {redacted(settings.database_url)}",
        file=sys.stderr,
    )
    await serving.serve(settings, stop)
    return 0
