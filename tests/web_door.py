"""`debatebot web` as the tests run it: the same app and worker pool the command builds
(`bot.cli.web.build_web`), on a loopback port of its own, with a fake model in place of the
providers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from sqlalchemy import Engine

from bot.cli.web import WebServer, build_web
from bot.settings import Settings
from bot.store.db import make_engine
from bot.wiring import build_services
from engine.llm import LLM
from tests.migrated import upgrade


@dataclass
class RunningWeb:
    url: str
    engine: Engine
    settings: Settings
    server: WebServer


@contextlib.asynccontextmanager
async def running_web(
    database_url: str,
    llm: LLM,
    *,
    token: str | None = None,
    runs_debates: bool = True,
    listening_as: str = "127.0.0.1",
    **overrides: Any,
) -> AsyncIterator[RunningWeb]:
    """The web door on `database_url` (migrated here) answering with `llm`, until the block
    ends. It listens on 127.0.0.1 but is built as if on `listening_as` (what `/mcp` requires
    a token on)."""
    upgrade(database_url)
    values: dict[str, Any] = {
        "database_url": database_url,
        "provider": "fake",
        "worker_poll_s": 0.05,
        "shutdown_grace_s": 0.0,
        "review_sample_rate": 0.0,
        "review_sample_max": 0.0,
    }
    values.update(overrides)
    settings = Settings(**values)
    services = build_services(settings, resolve_llm=lambda _model: llm)
    engine = make_engine(database_url, busy_timeout_s=settings.database_timeout_s)
    server = build_web(
        settings, services, engine, token=token, runs_debates=runs_debates, host=listening_as
    )
    http = uvicorn.Server(
        uvicorn.Config(
            server.app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
    )
    await server.runtime.start()
    try:
        async with server.serving_mcp():
            task = asyncio.create_task(http.serve())
            while not http.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
                await asyncio.sleep(0.01)
            port = http.servers[0].sockets[0].getsockname()[1]
            try:
                yield RunningWeb(f"http://127.0.0.1:{port}", engine, settings, server)
            finally:
                http.should_exit = True
                await server.feeds.aclose()
                await task
    finally:
        await server.stop()
        await services.aclose()
        engine.dispose()
