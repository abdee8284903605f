"""`debatebot web`: the playground page and the HTTP API (`bot.fronts.web`) on 127.0.0.1:8088 by
default, with a worker pool of its own that runs the debates it admits (DEBATEBOT_WEB_RUNS_DEBATES,
`--no-worker` where workers run beside it), until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy import Engine
from starlette.applications import Starlette

from bot.cli.processes import _stop_on_signals
from bot.fronts.mcp.auth import accepted_tokens
from bot.fronts.mcp.http import McpHttp, mcp_over_http
from bot.fronts.mcp.reading import Reader
from bot.fronts.web.app import WebDoor, build_app
from bot.fronts.web.asking import model_choices
from bot.fronts.web.feeds import Feeds
from bot.fronts.web.guard import Guard, web_token
from bot.fronts.web.reviewing import WebReviews
from bot.intake.deployment import deployment_intake
from bot.jobs.writing import WritingBoard
from bot.logs import configure_logging
from bot.receipting import public_keys_of, receipt_issuer
from bot.runtime import Runtime
from bot.settings import Settings
from bot.store.db import redacted
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import DebateServices, build_services, build_worker, open_store
from bot.wiring.work import build_notifier, process_name
from engine.protocols import protocol_names


@dataclass
class WebServer:
    """The app, its live feeds, the runtime that runs what it admits (none: workers do), and
    its `/mcp` (None: not served, logged)."""

    app: Starlette
    feeds: Feeds
    runtime: Runtime
    mcp: McpHttp | None = None

    @contextlib.asynccontextmanager
    async def serving_mcp(self) -> AsyncIterator[None]:
        """Keeps `/mcp`'s session manager running (the server runs without ASGI lifespan)."""
        async with contextlib.AsyncExitStack() as stack:
            if self.mcp is not None:
                await stack.enter_async_context(self.mcp.running())
            yield

    async def stop(self) -> None:
        await self.feeds.aclose()
        await self.runtime.stop()


def build_web(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    token: str | None,
    runs_debates: bool,
    poll_s: float = 0.1,
    host: str = "127.0.0.1",
) -> WebServer:
    """The web door on `engine` listening on `host`: the deployment's intake (debates asked
    here are the deployment's own workspace's, as the terminal's are), its feeds and reviews,
    `/mcp` (DEBATEBOT_MCP_TOKEN or the web `token` off the loopback address), and a worker pool
    when it runs the debates itself."""
    # The notifier stages the review request of an agent's escalated debate for the channel set
    # for agents (DEBATEBOT_MCP_REVIEW_CHANNEL); `serve` or a worker delivers it.
    # What the pool's turns write shows on the pages following them before it is stored.
    board = WritingBoard()
    worker = build_worker(
        services,
        engine,
        worker_id=f"{process_name()}/web",
        reporter=build_notifier(settings, engine),
        sinks=board.sink_for,
    )
    intake = deployment_intake(
        settings, services.policy, engine, workspace=PENDING_WORKSPACE, wake=worker.wake
    )
    feeds = Feeds(engine, workspace=PENDING_WORKSPACE, poll_s=poll_s, writing=board)
    door = WebDoor(
        intake=intake,
        workspace=PENDING_WORKSPACE,
        feeds=feeds,
        reviews=WebReviews(
            engine,
            workspace=PENDING_WORKSPACE,
            receipts=receipt_issuer(settings, services.registry),
        ),
        guard=Guard(token),
        audit_key=settings.audit_key_bytes(),
        models=lambda: model_choices(settings, services.registry, services.registry.today()),
        protocols=protocol_names(),
        public_keys=public_keys_of(settings),
    )
    runtime = Runtime(
        worker=worker,
        concurrency=settings.worker_concurrency if runs_debates else 0,
        grace_s=settings.shutdown_grace_s,
    )
    mcp = mcp_over_http(
        intake,
        reader=Reader(engine, key=settings.audit_key_bytes()),
        hosts=services.hosts,
        tokens=accepted_tokens(settings.mcp_token, token),
        host=host,
    )
    return WebServer(app=build_app(door, mcp=mcp), feeds=feeds, runtime=runtime, mcp=mcp)


async def web(args: argparse.Namespace) -> int:
    """Serve the page and the API until stopped."""
    import uvicorn

    settings = Settings()
    configure_logging(settings)
    host = args.host or settings.web_host
    port = args.port or settings.web_port
    token = web_token(settings, host)
    runs = settings.web_runs_debates and not args.no_worker
    services = build_services(settings)
    stop = _stop_on_signals()
    try:
        with open_store(settings, serving=True) as engine:
            server = build_web(
                settings, services, engine, token=token, runs_debates=runs, host=host
            )
            http = uvicorn.Server(
                uvicorn.Config(
                    server.app,
                    host=host,
                    port=port,
                    lifespan="off",
                    log_level="warning",
                    # Open event streams end with the server, not after it.
                    timeout_graceful_shutdown=2,
                )
            )
            await server.runtime.start()
            async with server.serving_mcp():
                serving = asyncio.create_task(http.serve())
                print(
                    f"debatebot web on http://{host}:{port}/"
                    f" ({'token required' if token else 'no token: this machine only'});"
                    f" {'running the debates it admits' if runs else 'workers run the debates'}"
                    f" on {redacted(settings.database_url)}"
                    f"{'; MCP at /mcp' if server.mcp is not None else ''}",
                    file=sys.stderr,
                )
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                http.should_exit = True
                await serving
            await server.stop()
    finally:
        await services.aclose()
    return 0
