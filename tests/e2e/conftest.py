"""The bot, whole, against the Slack emulator: real Bolt app behind uvicorn on 127.0.0.1, real
`slack_sdk` client, migrated SQLite store, in-process workers, scripted models."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import uvicorn
from sqlalchemy import Engine
from sqlmodel import col, select

from bot.runtime import BotRuntime
from bot.settings import Settings
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox
from bot.wiring import DebateServices, build_bot, build_services
from engine.providers.fake import FunctionLLM, SchemaFillingLLM
from tests.e2e.driver import WORKSPACE, SlackDriver
from tests.e2e.slack_emulator import SlackEmulator
from tests.helpers import DebateScript
from tests.migrated import upgrade

# Sampled reviews are drawn at random (DEBATEBOT_REVIEW_SAMPLE_RATE, 5 % by default, and
# DEBATEBOT_REVIEW_SAMPLE_MAX, 20 %, while a workspace has few sampled reviews): a test that
# wants one asks for it, so no other test meets a review request it did not cause.
os.environ.setdefault("DEBATEBOT_REVIEW_SAMPLE_RATE", "0")
os.environ.setdefault("DEBATEBOT_REVIEW_SAMPLE_MAX", "0")

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-1234-5678-emulatedtoken"
ADMIN = "UADMIN"
REVIEWER = "UREVIEW"
CHANNEL = "CDEBATE"
FakeLLM = FunctionLLM | SchemaFillingLLM


@dataclass
class Bot:
    emulator: SlackEmulator
    driver: SlackDriver
    runtime: BotRuntime
    engine: Engine
    llm: FakeLLM
    settings: Settings
    """What the bot runs with (worker processes beside it are started with the same)."""

    async def wait_for(self, predicate: Callable[[], Any], what: str, limit_s: float = 60) -> Any:
        """Poll until `predicate()` is truthy; a generous deadline, not a speed assertion."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    async def in_thread(self, thread_ts: str, holding: str, what: str) -> dict[str, Any]:
        """Wait for the first message in the thread of CHANNEL whose text holds `holding`."""
        return await self.wait_for(  # type: ignore[no-any-return]
            lambda: next(
                (m for m in self.emulator.in_thread(CHANNEL, thread_ts) if holding in m["text"]),
                None,
            ),
            what,
        )

    async def wait_for_health(self, status: int, limit_s: float = 30) -> tuple[int, Any]:
        """Poll `/healthz` until it answers `status`; its status and report."""
        deadline = time.monotonic() + limit_s
        while True:
            answer = await self.driver.health()
            if answer[0] == status or time.monotonic() > deadline:
                assert answer[0] == status, f"/healthz still answers {answer}"
                return answer
            await asyncio.sleep(0.05)

    def debates(self) -> list[Debate]:
        with session_scope(self.engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Debate).order_by(col(Debate.id))))

    def owed(self) -> list[Outbox]:
        """Outbox rows not yet settled (neither sent, given up nor split)."""
        with session_scope(self.engine, workspace=WORKSPACE) as session:
            return list(
                session.exec(select(Outbox).where(col(Outbox.state).in_(("pending", "sending"))))
            )

    async def finished(self, count: int = 1, limit_s: float = 60) -> list[Debate]:
        """Wait until `count` debates finished and every message they owe was delivered (or
        given up); returns the debates as stored then."""

        def done() -> list[Debate] | None:
            rows = self.debates()
            finished = len(rows) >= count and all(d.state == "finished" for d in rows)
            return rows if finished and not self.owed() else None

        await self.wait_for(done, f"{count} finished debate(s) with nothing owed", limit_s)
        return self.debates()


BotFactory = Callable[..., Awaitable[Bot]]


@pytest.fixture
async def start_bot(tmp_path: Path) -> AsyncIterator[BotFactory]:
    """Start the bot with a scripted model (`script`), on a database of its own in `tmp_path`
    or on `database_url` (migrated here), with setting overrides; stops it after."""
    started: list[
        tuple[
            uvicorn.Server,
            asyncio.Task[None],
            BotRuntime,
            DebateServices,
            SlackEmulator,
            aiohttp.ClientSession,
            Engine,
        ]
    ] = []

    async def start(
        script: DebateScript | None = None,
        llm: FakeLLM | None = None,
        database_url: str | None = None,
        **overrides: Any,
    ) -> Bot:
        emulator = SlackEmulator(admins={ADMIN})
        await emulator.start()
        url = database_url or f"sqlite:///{tmp_path / f'bot{len(started)}.sqlite3'}"
        upgrade(url)
        values: dict[str, Any] = {
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": SIGNING_SECRET,
            "slack_api_url": emulator.api_url,
            "database_url": url,
            "provider": "fake",
            "worker_concurrency": 1,
            "post_interval_s": 0.0,
            "worker_poll_s": 0.05,
            "outbox_poll_s": 0.05,
            "outbox_status_interval_s": 0.2,
            "outbox_stream_interval_s": 0.1,
            "outbox_backoff_max_s": 1.0,
            "slack_timeout_s": 2.0,
            "shutdown_grace_s": 0.0,
        }
        values.update(overrides)
        settings = Settings(**values)
        llm = llm or (script or DebateScript()).llm()
        services = build_services(settings, resolve_llm=lambda _model: llm)
        engine = make_engine(url, busy_timeout_s=settings.database_timeout_s)
        runtime = build_bot(settings, services, engine)
        await runtime.start()
        # A test's faults begin once the bot knows who it is, as a serving bot does seconds
        # after start-up; a slow machine would otherwise meet them in that first `auth.test`.
        directory = runtime.directory
        deadline = time.monotonic() + 30
        while directory is not None and directory.known_bot_user() is None:
            assert time.monotonic() < deadline, "the bot never learned its identity (auth.test)"
            await asyncio.sleep(0.01)
        server = uvicorn.Server(
            uvicorn.Config(
                runtime.asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
            )
        )
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        session = aiohttp.ClientSession()
        driver = SlackDriver(
            bot_url=f"http://127.0.0.1:{port}",
            signing_secret=SIGNING_SECRET,
            response_base=f"{emulator.url}/response",
            session=session,
        )
        started.append((server, task, runtime, services, emulator, session, engine))
        return Bot(
            emulator=emulator,
            driver=driver,
            runtime=runtime,
            engine=engine,
            llm=llm,
            settings=settings,
        )

    yield start
    for server, task, runtime, services, emulator, session, engine in started:
        server.should_exit = True
        await task
        await runtime.stop()
        await services.aclose()
        await session.close()
        await emulator.stop()
        engine.dispose()
