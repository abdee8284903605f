"""`debatebot serve`: the bot over Socket Mode or HTTP until told to stop, with `/healthz` and
`/metrics` beside it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.metrics import Metrics
from bot.runtime import BotRuntime, check_bot_token, startup_heap_frozen
from bot.settings import Settings, SettingsError
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import build_bot, build_services, check_configured_models, open_store

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import uvicorn
    from sqlalchemy import Engine

    from bot.fronts.mcp.http import McpHttp
    from bot.wiring.services import DebateServices


def transport(settings: Settings) -> str:
    """`socket` when an app-level token is set (no public URL needed), else `http`."""
    return "socket" if settings.slack_app_token is not None else "http"


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run the bot until `stop` is set: Socket Mode or HTTP, with workers, delivery and
    scheduler. Raises SettingsError when Slack refuses the bot token at start-up or the
    app-level token for good, or when a configured model is retired."""
    services = build_services(settings)
    check_configured_models(services)
    with open_store(settings, serving=True) as engine, contextlib.ExitStack() as frozen:
        runtime = build_bot(settings, services, engine)
        try:
            if runtime.directory is not None:
                await check_bot_token(
                    runtime.directory, engine, audit_key=settings.audit_key_bytes()
                )
        except SettingsError:
            await runtime.stop()
            await services.aclose()
            raise
        exporter = None
        if settings.metrics_port is not None:
            exporter = serve_metrics(runtime.metrics, settings.http_host, settings.metrics_port)
        frozen.enter_context(startup_heap_frozen())
        runtime.asgi.mcp = mcp = _mcp(settings, services, engine, runtime)
        await runtime.start()
        try:
            async with contextlib.AsyncExitStack() as mcp_running:
                if mcp is not None:
                    await mcp_running.enter_async_context(mcp.running())
                await _serve(settings, runtime, stop)
        finally:
            await runtime.stop()
            await services.aclose()
            if exporter is not None:
                exporter.shutdown()


async def _serve(settings: Settings, runtime: BotRuntime, stop: asyncio.Event) -> None:
    if transport(settings) == "socket":
        ops = _ops_server(settings, runtime)
        try:
            await _serve_socket_mode(settings, runtime, stop)
        finally:
            if ops is not None:
                ops.should_exit = True
    else:
        await _serve_http(settings, runtime, stop)


def _mcp(
    settings: Settings, services: DebateServices, engine: Engine, runtime: BotRuntime
) -> McpHttp | None:
    """MCP over HTTP at `/mcp` (bot.fronts.mcp): debates admitted by the one intake, run by
    this process's workers (woken at once), as the deployment's own workspace's: the bot
    token's once Slack has named it (so the review channel's reviewers are found for an
    escalated one), with the rows asked before it was known (`pending`) read as its own."""
    from bot.fronts.mcp.auth import accepted_tokens
    from bot.fronts.mcp.http import mcp_over_http
    from bot.fronts.mcp.reading import Reader
    from bot.wiring.surfaces import build_intake

    known = runtime.directory.known_workspace() if runtime.directory is not None else None
    workspace = replace(known, with_pending=True) if known is not None else PENDING_WORKSPACE
    web_token = settings.web_token.get_secret_value() if settings.web_token else None
    return mcp_over_http(
        build_intake(
            settings, services, engine, workspace=workspace, wake=runtime.work.worker.wake
        ),
        reader=Reader(engine, key=settings.audit_key_bytes(), workspace=workspace),
        hosts=services.hosts,
        tokens=accepted_tokens(settings.mcp_token, web_token),
        host=settings.http_host,
    )


async def _serve_socket_mode(settings: Settings, runtime: BotRuntime, stop: asyncio.Event) -> None:
    from bot.slack.socket_mode import GuardedSocketModeHandler

    _, _, app_token = settings.slack_secrets()
    assert app_token is not None
    handler = GuardedSocketModeHandler(
        runtime.app, app_token, ping_interval_s=settings.socket_ping_s
    )
    client = handler.guarded
    connecting = asyncio.create_task(handler.connect_async())
    stopped = asyncio.create_task(stop.wait())
    refused = asyncio.create_task(client.refused.wait())
    try:
        await asyncio.wait([stopped, refused], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (connecting, stopped, refused):
            task.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await handler.close_async()
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
        uvicorn.Config(
            OpsASGI(health, runtime.metrics, runtime.asgi.public_keys, runtime.asgi.mcp),
            lifespan="off",
            log_level="warning",
        )
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
            # One line per request, each `POST /slack/events 200`, written before the answer:
            # a tenth of an acknowledgement's time. The bot logs what went wrong itself.
            access_log=settings.log_level.upper() == "DEBUG",
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
