"""Events Slack will not send again are never lost (issue 41, items 4 and 5), over both
transports: a review reaction, an ADR post and a message to the agent that arrive while Slack
refuses the bot token are kept in the store and handled once the token works (with OAuth
installs, the workspace's refusal is marked for every replica and its probe, once it finds the
token taken, leads to them); past the bound, the sender is told once the token works. A review
reaction whose thread Slack fails to give for a moment (a 5xx through a few quick tries) is
told so, not "add me to the channel", and is tried again until the debate starts."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from bot.serving import serve
from bot.store import channels, held, refusals
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate, DebateState
from bot.store.held import HeldLimits
from bot.store.tenancy import EVERY_WORKSPACE
from tests.e2e.conftest import ADMIN, CHANNEL, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault, SlackEmulator
from tests.e2e.test_oauth_installs import OTHER, install, outer, post_event, start_many, tenancy
from tests.e2e.test_socket_mode import socket_settings, until
from tests.e2e.test_triggers import ADR_TEXT

FAST: dict[str, Any] = {
    "post_interval_s": 0.0,
    "worker_poll_s": 0.05,
    "outbox_poll_s": 0.05,
    "outbox_backoff_max_s": 1.0,
    "slack_timeout_s": 2.0,
    "slack_token_probe_s": 0.2,
    "slack_token_probe_max_s": 1.0,
    "slack_event_retry_s": 0.3,
}
"""Probes and retries a tenth of their defaults or less, so the waits below are short."""
DM = "DALICE"
_ids = itertools.count(1)


@dataclass
class Served:
    """The bot on one transport: the emulator it calls, its store, and how Slack sends it an
    event (signed over HTTP, or an envelope down the socket)."""

    emulator: SlackEmulator
    engine: Engine
    send: Callable[[dict[str, Any]], Awaitable[str]]

    def debates(self) -> list[Debate]:
        with session_scope(self.engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Debate).order_by(col(Debate.id))))

    def held(self) -> int:
        with session_scope(self.engine, workspace=EVERY_WORKSPACE) as session:
            return held.held_count(session)

    def watch_adrs(self) -> None:
        with session_scope(self.engine, workspace=WORKSPACE) as session:
            channels.save_channel_settings(
                session, channel_id=CHANNEL, updated_by=ADMIN, values={"adr_watch": True}
            )


def envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    return {
        "token": "unused",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }


@contextlib.asynccontextmanager
async def serving(transport: str, start_bot: BotFactory, tmp_path: Path) -> AsyncIterator[Served]:
    if transport == "http":
        bot = await start_bot(**FAST)

        async def over_http(event: dict[str, Any]) -> str:
            event_id = f"EvHeld{next(_ids)}"
            reply = await bot.driver.event(event, event_id=event_id)
            assert reply.status == 200
            return event_id

        await bot.wait_for(lambda: bot.emulator.calls_of("auth.test"), "the bot's identity")
        yield Served(bot.emulator, bot.engine, over_http)
        return
    emulator = SlackEmulator(admins={ADMIN})
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'socket.sqlite3'}"
    settings = socket_settings(emulator, url, **FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    engine = make_engine(url)

    async def over_socket(event: dict[str, Any]) -> str:
        event_id = f"EvHeld{next(_ids)}"
        await emulator.push("events_api", envelope(event, event_id), retry_attempt=0)
        return event_id

    try:
        await until(lambda: emulator.sockets, "the socket connection")
        yield Served(emulator, engine, over_socket)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        engine.dispose()
        await emulator.stop()


def reaction(ts: str, user: str = "UBOB", channel: str = CHANNEL) -> dict[str, Any]:
    return {
        "type": "reaction_added",
        "user": user,
        "reaction": "scales",
        "item": {"type": "message", "channel": channel, "ts": ts},
        "event_ts": ts,
    }


def post(ts: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": CHANNEL,
        "user": "UALICE",
        "text": text,
        "ts": ts,
        "channel_type": "channel",
    }


def dm(ts: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": DM,
        "channel_type": "im",
        "user": "UALICE",
        "text": text,
        "ts": ts,
        "event_ts": ts,
    }


async def finished(served: Served, count: int) -> list[Debate]:
    def done() -> list[Debate] | None:
        rows = served.debates()
        ready = len(rows) == count and all(d.state == DebateState.FINISHED for d in rows)
        return rows if ready else None

    return await until(done, f"{count} finished debates", limit_s=90)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("transport", "code"),
    [("http", "invalid_auth"), ("socket", "token_revoked"), ("http", "account_inactive")],
)
async def test_events_met_by_a_refused_token_are_kept_and_handled_once_it_works(
    start_bot: BotFactory, tmp_path: Path, transport: str, code: str
) -> None:
    async with serving(transport, start_bot, tmp_path) as served:
        served.watch_adrs()
        root = served.emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
        adr = served.emulator.seed_message(CHANNEL, ADR_TEXT)
        # Slack refuses the bot token on every method, `auth.test` included, with HTTP 200 and
        # its code, as its references list for every Web API method.
        served.emulator.fail_for("*", Fault(error=code), seconds=600)

        await served.send(reaction(root))
        await until(lambda: served.held() == 1, "the reaction kept")
        await served.send(post(adr, ADR_TEXT))
        await served.send(dm(served.emulator.next_ts(), "Should we adopt trunk-based development?"))
        await until(lambda: served.held() == 3, "the ADR post and the message kept")
        assert served.debates() == [], "nothing is queued while the token is refused"
        assert not served.emulator.posted(CHANNEL)
        assert not served.emulator.posted(DM)

        # The token works again: the process's probe finds it, and every kept event is handled.
        served.emulator.heal()
        debates = await finished(served, 3)
        assert sorted(d.source for d in debates) == ["adr", "assistant", "reaction"]
        assert {d.thread_ts for d in debates} >= {root, adr}
        await until(lambda: served.held() == 0, "the kept events forgotten")
        assert not [
            m for m in served.emulator.posted(CHANNEL) if "refused my bot token" in m["text"]
        ], "nobody is told of a refusal that was waited out"


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_a_brief_slack_failure_reading_the_thread_is_told_as_such_and_retried(
    start_bot: BotFactory, tmp_path: Path, transport: str
) -> None:
    async with serving(transport, start_bot, tmp_path) as served:
        root = served.emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
        # Slack's 503, with the JSON body its error docs give a transient failure, for every
        # quick try of the first reading of the thread.
        served.emulator.fail(
            "conversations.replies", *[Fault(status=503, error="service_unavailable")] * 3
        )
        await served.send(reaction(root))

        [debate] = await finished(served, 1)
        assert (debate.source, debate.thread_ts) == ("reaction", root)
        told = [m["text"] for m in served.emulator.in_thread(CHANNEL, root)]
        assert any(
            "Slack had a temporary error reading this thread (service_unavailable)" in t
            and "I will try again" in t
            for t in told
        ), told
        assert not any("add me to the channel" in t or "reinstall" in t for t in told), told
        await until(lambda: served.held() == 0, "the kept event forgotten")


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_a_thread_slack_keeps_failing_to_give_is_given_up_with_the_cause(
    start_bot: BotFactory, tmp_path: Path, transport: str
) -> None:
    async with serving(transport, start_bot, tmp_path) as served:
        root = served.emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
        served.emulator.fail_for("conversations.replies", Fault(status=500), seconds=600)
        await served.send(reaction(root))

        def given_up() -> list[str]:
            texts = [m["text"] for m in served.emulator.in_thread(CHANNEL, root)]
            return [t for t in texts if "kept failing" in t]

        [final] = await until(given_up, "the answer giving up", limit_s=90)
        assert "Slack had a temporary error reading this thread (internal_error)" in final
        assert "Remove the reaction and add it again" in final
        assert served.debates() == []
        await until(lambda: served.held() == 0, "the kept event forgotten")


async def test_past_the_bound_the_sender_is_told_once_the_token_works(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(**FAST)
    await bot.wait_for(lambda: bot.emulator.calls_of("auth.test"), "the bot's identity")
    assert bot.runtime.held is not None
    bot.runtime.held.limits = HeldLimits(max_held=1)
    first = bot.emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
    second = bot.emulator.seed_message(CHANNEL, "Shall we drop the monolith?")
    bot.emulator.fail_for("*", Fault(error="invalid_auth"), seconds=600)

    await bot.driver.event(reaction(first, user="UBOB"))
    await bot.wait_for(lambda: held_rows(bot.engine) == 1, "the first reaction kept")
    await bot.driver.event(reaction(second, user="UCAROL"))
    await asyncio.sleep(0.5)
    assert held_rows(bot.engine) == 1, "the second is past the bound"
    assert not bot.emulator.dms("UCAROL"), "nobody can be told while the token is refused"

    bot.emulator.heal()
    [debate] = await bot.finished(limit_s=90)
    assert debate.thread_ts == first
    [told] = await bot.wait_for(lambda: bot.emulator.dms("UCAROL"), "UCAROL told")
    assert f"your :scales: reaction in <#{CHANNEL}>" in told["text"]
    assert "did not keep" in told["text"]
    assert "Remove the reaction and add it again" in told["text"]


def held_rows(engine: Engine) -> int:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        return held.held_count(session)


async def test_a_workspace_whose_token_is_refused_keeps_its_events_until_its_probe_takes_it(
    start_bot: BotFactory,
) -> None:
    """With OAuth installs (HTTP only): the first event that meets the refusal marks the
    workspace for every replica, which starts its probes; the probe that finds the token taken
    clears the mark, and the kept event is handled; another workspace is not held."""
    bot = await start_many(start_bot, **FAST)
    await install(bot, "T1")
    await install(bot, "T2")
    root = bot.emulator.seed_message(CHANNEL, "Shall we move sessions to Redis?")
    other = bot.emulator.seed_message(OTHER, "Shall we drop the monolith?")
    tenancy(bot).refuse("T1", "token_revoked")

    assert await post_event(bot, outer("T1", reaction(root))) == 200
    await bot.wait_for(lambda: held_rows(bot.engine) == 1, "T1's reaction kept")
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        assert refusals.refused_count(session) == 1, "marked for every replica"
    assert await post_event(bot, outer("T2", reaction(other, channel=OTHER))) == 200

    def sources(team: str) -> list[str]:
        with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
            query = select(Debate).where(col(Debate.team_id) == team)
            return [d.source for d in session.exec(query)]

    await bot.wait_for(lambda: sources("T2") == ["reaction"], "T2's debate, not held")
    assert sources("T1") == []

    tenancy(bot).accept("T1")
    await bot.wait_for(lambda: sources("T1") == ["reaction"], "T1's kept reaction handled")
    await bot.wait_for(lambda: held_rows(bot.engine) == 0, "the kept event forgotten")
