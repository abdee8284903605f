"""`serve` over Socket Mode against a Socket Mode server of our own on 127.0.0.1 (the emulator's
WebSocket, handed out by `apps.connections.open`): a slash command, an event and an interaction
arrive as envelopes and are acknowledged; Slack's `disconnect` refresh and an abrupt cut are
survived; a refused app token ends `serve` with a clear message; SIGTERM and SIGINT stop it in
every state."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlmodel import select

from bot.serving import serve
from bot.settings import Settings, SettingsError
from bot.store import channels
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate
from tests.e2e.conftest import BOT_TOKEN, CHANNEL
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault, SlackEmulator
from tests.e2e.test_serve import DEBATEBOT, free_port, serve_env
from tests.migrated import upgrade

APP_TOKEN = "xapp-1-A1-1234-emulatedapptoken"


async def until(predicate: Any, what: str, limit_s: float = 30) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def socket_settings(emulator: SlackEmulator, url: str, **extra: Any) -> Settings:
    """Settings for `serve` over Socket Mode against the emulator, on a migrated store."""
    upgrade(url)
    return Settings(
        slack_bot_token=SecretStr(BOT_TOKEN),
        slack_app_token=SecretStr(APP_TOKEN),
        slack_api_url=emulator.api_url,
        database_url=url,
        provider="fake",
        shutdown_grace_s=0,
        **extra,
    )


@dataclass
class SocketBot:
    """`serve` over Socket Mode against `emulator`, on a SQLite store of its own."""

    emulator: SlackEmulator
    engine: Engine
    settings: Settings

    def debates(self) -> list[Debate]:
        with session_scope(self.engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Debate)))


@contextlib.asynccontextmanager
async def socket_bot(
    tmp_path: Path, admins: set[str] | None = None, **extra: Any
) -> AsyncIterator[SocketBot]:
    """Serve over Socket Mode (fast polls, `extra` settings; the emulator's workspace admins
    `admins`) until the block ends; yields once the socket is connected."""
    emulator = SlackEmulator(admins=admins or set())
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'socket.sqlite3'}"
    settings = socket_settings(
        emulator, url, post_interval_s=0, worker_poll_s=0.05, outbox_poll_s=0.05, **extra
    )
    engine = make_engine(url)
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(settings, stop))
    try:
        await until(lambda: emulator.sockets, "the socket connection")
        yield SocketBot(emulator, engine, settings)
    finally:
        stop.set()
        await serving
        engine.dispose()
        await emulator.stop()


def event_envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An Events API delivery of `event`, as it arrives in an `events_api` envelope."""
    return {
        "type": "event_callback",
        "team_id": "T1",
        "api_app_id": "A1",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }


def command(text: str, n: int) -> dict[str, Any]:
    return {
        "token": "unused",
        "team_id": "T1",
        "channel_id": CHANNEL,
        "user_id": "UALICE",
        "command": "/debate",
        "text": text,
        "api_app_id": "A1",
        "response_url": "https://hooks.invalid/response",
        "trigger_id": f"trigger.socket.{n}",
    }


async def test_envelopes_over_the_socket_refresh_and_abrupt_close(tmp_path: Path) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'socket.sqlite3'}"
    settings = socket_settings(
        emulator,
        url,
        post_interval_s=0,
        worker_poll_s=0.05,
        outbox_poll_s=0.05,
        socket_ping_s=0.5,
    )
    stop = asyncio.Event()
    engine = make_engine(url)
    # Every verdict asks for a review, whatever the fake's independent judge makes of it.
    with session_scope(engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by="UADMIN", values={"threshold": 0.99}
        )
    serving = asyncio.create_task(serve(settings, stop))

    def debates() -> list[Debate]:
        with session_scope(engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Debate)))

    def verdicts() -> int:
        return sum("Verdict" in m["text"] for m in emulator.posted(CHANNEL))

    try:
        await until(lambda: emulator.sockets, "the socket connection")
        first = await emulator.push("slash_commands", command("Should we adopt ADR-042?", 1))
        await until(lambda: any(a.get("envelope_id") == first for a in emulator.socket_acks), "ack")
        await until(lambda: verdicts() == 1, "the first verdict")
        assert gc.get_freeze_count() > 10_000, "serve keeps start-up's heap out of collections"

        root = emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
        reaction = {
            "type": "reaction_added",
            "user": "UBOB",
            "reaction": "scales",
            "item": {"type": "message", "channel": CHANNEL, "ts": root},
        }
        event = event_envelope(reaction, "EvSocket1")
        await emulator.push("events_api", event, retry_attempt=0, retry_reason="")
        await until(lambda: len(debates()) == 2, "the reaction's debate")

        request = await until(
            lambda: next(
                (m for m in emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
            ),
            "a review request",
        )
        actions = next(b for b in request["blocks"] if b["type"] == "actions")
        click = {
            "type": "block_actions",
            "team": {"id": "T1"},
            "user": {"id": "UMALLORY"},
            "api_app_id": "A1",
            "trigger_id": "trigger.socket.click",
            "channel": {"id": CHANNEL},
            "message": request,
            "container": {"type": "message", "message_ts": request["ts"]},
            "actions": [{**actions["elements"][0], "block_id": actions["block_id"]}],
        }
        await emulator.push("interactive", click)
        refusal = await until(lambda: emulator.ephemeral, "the refusal")
        reviewed = request["text"].removeprefix("Review needed for debate ")
        assert f"Only the reviewers of debate {reviewed}'s channel" in refusal[-1]["text"]

        await emulator.ask_to_reconnect()
        await until(lambda: emulator.socket_connections >= 2 and emulator.sockets, "reconnection")
        await emulator.push("slash_commands", command("Second question?", 2))
        await until(lambda: len(debates()) == 3, "a command after the refresh")

        connections = emulator.socket_connections
        await emulator.drop_socket()
        await until(
            lambda: emulator.socket_connections > connections and emulator.sockets,
            "reconnection after an abrupt cut",
        )
        await emulator.push("slash_commands", command("Third question?", 3))
        await until(lambda: len(debates()) == 4, "a command after the cut")
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)
        engine.dispose()
        await emulator.stop()
    assert gc.get_freeze_count() == 0, "and releases it when it stops"


async def test_a_refused_app_token_ends_serve_with_a_clear_error(tmp_path: Path) -> None:
    emulator = SlackEmulator(app_token_error="invalid_auth")
    await emulator.start()
    settings = socket_settings(emulator, f"sqlite:///{tmp_path / 'refused.sqlite3'}")
    try:
        with pytest.raises(
            SettingsError, match=r"refused DEBATEBOT_SLACK_APP_TOKEN \(invalid_auth\)"
        ):
            await asyncio.wait_for(serve(settings, asyncio.Event()), 30)
    finally:
        await emulator.stop()
    assert gc.get_freeze_count() == 0, "a serve that failed leaves nothing frozen"
    assert len(emulator.calls_of("apps.connections.open", ok_only=False)) == 1


async def start_serve(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        DEBATEBOT,
        "serve",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_serve_exits_non_zero_on_a_revoked_app_token(tmp_path: Path) -> None:
    emulator = SlackEmulator(app_token_error="not_allowed_token_type")
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'revoked.sqlite3'}"
    upgrade(url)
    env = {**serve_env(emulator, url, free_port()), "DEBATEBOT_SLACK_APP_TOKEN": APP_TOKEN}
    try:
        process = await start_serve(env)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        await emulator.stop()
    assert process.returncode == 1
    text = stderr.decode()
    assert "Slack refused DEBATEBOT_SLACK_APP_TOKEN (not_allowed_token_type)" in text
    assert APP_TOKEN not in text


@pytest.mark.parametrize(
    ("state", "signum"),
    [
        ("connecting", signal.SIGTERM),
        ("serving", signal.SIGINT),
        ("debating", signal.SIGTERM),
    ],
)
async def test_serve_stops_on_a_signal_in_every_state(
    tmp_path: Path, state: str, signum: int
) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    url = f"sqlite:///{tmp_path / f'{state}.sqlite3'}"
    upgrade(url)
    env = {
        **serve_env(emulator, url, free_port()),
        "DEBATEBOT_SLACK_APP_TOKEN": APP_TOKEN,
        "DEBATEBOT_FAKE_DELAY_S": "2",
        "DEBATEBOT_SHUTDOWN_GRACE_S": "1",
    }
    if state == "connecting":
        # Slack hangs on apps.connections.open: serve is stuck connecting.
        emulator.fail_for("apps.connections.open", Fault(status=500, hang_s=8), seconds=60)
    process = await start_serve(env)
    engine = make_engine(url)
    try:
        if state == "connecting":
            await until(
                lambda: emulator.calls_of("apps.connections.open", ok_only=False), "connect"
            )
        else:
            await until(lambda: emulator.sockets, "the socket connection")
        if state == "debating":
            await emulator.push("slash_commands", command("Should we adopt ADR-042?", 1))

            def running() -> bool:
                with session_scope(engine, workspace=WORKSPACE) as session:
                    return any(d.state == "running" for d in session.exec(select(Debate)))

            await until(running, "a running debate")
        os.kill(process.pid, signum)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
        await emulator.stop()
    assert process.returncode == 0, stderr.decode()
    if state == "debating":
        with session_scope(engine, workspace=WORKSPACE) as session:
            [debate] = session.exec(select(Debate)).all()
        # The lease was handed back: another worker may resume at once.
        assert debate.state == "running"
        assert debate.lease_expires_at is not None
        assert debate.lease_expires_at.timestamp() <= time.time()
    engine.dispose()


async def test_socket_mode_answers_health_and_metrics_on_its_port_but_never_slack_events(
    tmp_path: Path,
) -> None:
    """Events over the socket are not signed, so the HTTP port must not take them."""
    emulator = SlackEmulator()
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'ops.sqlite3'}"
    upgrade(url)
    port = free_port()
    env = {**serve_env(emulator, url, port), "DEBATEBOT_SLACK_APP_TOKEN": APP_TOKEN}
    process = await start_serve(env)
    base = f"http://127.0.0.1:{port}"
    try:
        await until(lambda: emulator.sockets, "the socket connection")
        async with aiohttp.ClientSession() as session:

            async def get(path: str) -> tuple[int, str] | None:
                try:
                    async with session.get(f"{base}{path}") as response:
                        return response.status, await response.text()
                except aiohttp.ClientConnectionError:
                    return None

            health = None
            for _ in range(600):
                health = await get("/healthz")
                if health is not None:
                    break
                await asyncio.sleep(0.05)
            assert health is not None, "the ops port never answered"
            assert health[0] == 200
            assert '"ok": true' in health[1]
            metrics = await get("/metrics")
            assert metrics is not None
            assert metrics[0] == 200
            assert "debatebot_queue_depth" in metrics[1]
            # The receipt keys' public file: made at start-up beside the SQLite database.
            keys = await get("/.well-known/debatebot-keys.json")
            assert keys is not None
            assert keys[0] == 200
            assert json.loads(keys[1])["keys"][0]["retired_at"] is None
            async with session.post(f"{base}/slack/events", data="command=%2Fdebate") as refused:
                assert refused.status == 404
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
        await emulator.stop()
    assert process.returncode == 0
