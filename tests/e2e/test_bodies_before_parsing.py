"""A request is authenticated before its body is parsed, and what Slack did sign is parsed
without a traceback: JSON nested 100,000 levels deep, lone surrogates (`"\\ud800"`) in an ADR
post, a reacted thread, a review note and the settings form.

Before, the body was parsed before the signature was checked, so a forged, deeply nested body
got a 500 with a traceback; a lone surrogate reached the database or Slack and failed there,
after the person had been answered (a review note lost the reviewer's decision)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlmodel import select

from bot.messages import action_ids
from bot.serving import serve
from bot.store import channels
from bot.store.channel_tables import ChannelSettings
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate
from bot.store.review_tables import Review
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import SlackEmulator
from tests.e2e.test_reviews import escalated
from tests.e2e.test_socket_mode import command, socket_settings, until
from tests.e2e.test_triggers import message_event, watch_adrs

SURROGATE = "\ud800"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("levels", [50_000, 100_000])
async def test_a_forged_deeply_nested_body_is_refused_unparsed(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, levels: int
) -> None:
    bot = await start_bot()
    as_json = (
        json.dumps({"type": "event_callback", "event": "X"})[:-1] + f', "n": {nested(levels)}}}'
    )
    as_form = urlencode({"payload": '{"type": "block_actions", "n": ' + nested(levels) + "}"})

    for body, kind in (
        (as_json, "application/json"),
        (as_form, "application/x-www-form-urlencoded"),
    ):
        reply = await bot.driver.send(body, kind, signature="v0=" + "0" * 64)
        assert reply.status == 401
        assert "X-Slack-Signature does not match" in reply.body
        stale = await bot.driver.send(body, kind, timestamp=int(time.time()) - 600)
        assert stale.status == 401

    assert errors_logged(caplog) == []
    assert bot.debates() == []


@pytest.mark.parametrize("levels", [60, 50_000, 100_000])
async def test_a_signed_but_deeply_nested_body_gets_a_400(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, levels: int
) -> None:
    """Slack would never send these; a proxy or a leaked secret could. 60 levels parse but are
    deeper than any Slack payload; 50,000 pass Python's recursion limit."""
    bot = await start_bot()
    as_json = (
        '{"type": "event_callback", "event_id": "Ev1", "event": {"type": "message", "n": '
        + nested(levels)
        + "}}"
    )
    as_form = urlencode({"payload": '{"type": "block_actions", "n": ' + nested(levels) + "}"})

    for body, kind in (
        (as_json, "application/json"),
        (as_form, "application/x-www-form-urlencoded"),
    ):
        reply = await bot.driver.send(body, kind)
        assert reply.status == 400
        assert "nest" in reply.body

    assert errors_logged(caplog) == []


async def test_unsigned_garbage_is_refused_as_unsigned_and_signed_garbage_as_garbage(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    url = f"{bot.driver.bot_url}/slack/events"
    now = str(int(time.time()))
    garbage = b"\xff\xfe\xfd"

    async with bot.driver.session.post(
        url, data=garbage, headers={"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v0=0"}
    ) as unsigned:
        assert unsigned.status == 401
    signature = "v0=" + bot.driver.sign("", int(now))[3:]  # not over these bytes
    async with bot.driver.session.post(
        url,
        data=garbage,
        headers={"X-Slack-Request-Timestamp": now, "X-Slack-Signature": signature},
    ) as forged:
        assert forged.status == 401

    import hashlib
    import hmac

    from tests.e2e.conftest import SIGNING_SECRET

    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:" + now.encode() + b":" + garbage, hashlib.sha256)
    async with bot.driver.session.post(
        url,
        data=garbage,
        headers={"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v0=" + mac.hexdigest()},
    ) as signed:
        assert signed.status == 400
        assert "not UTF-8" in await signed.text()
    for timestamp in ("abc", "\u00b2\u00b3", ""):
        async with bot.driver.session.post(
            url, data=b"a=b", headers={"X-Slack-Request-Timestamp": timestamp}
        ) as odd:
            assert odd.status == 401


async def test_a_lone_surrogate_in_an_adr_post_is_debated_as_a_replacement_character(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    watch_adrs(bot)
    text = f"ADR-7: Use Redis {SURROGATE} for sessions\n\nContext: latency.\nDecision: Redis."
    ts = bot.emulator.seed_message(CHANNEL, "ADR-7: Use Redis for sessions")

    reply = await bot.driver.event(message_event(ts, text))

    assert reply.status == 200
    [debate] = await bot.finished()
    assert "\ufffd" in debate.spec_json or "\\ufffd" in debate.spec_json
    assert SURROGATE not in debate.question
    assert errors_logged(caplog) == []


async def test_a_lone_surrogate_in_a_reacted_thread_is_debated(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    root = bot.emulator.seed_message(CHANNEL, f"Proposal {SURROGATE}: drop the read replica.")
    bot.emulator.seed_message(CHANNEL, f"agreed {SURROGATE}", thread_ts=root)

    await bot.driver.event(
        {
            "type": "reaction_added",
            "user": "UBOB",
            "reaction": "scales",
            "item": {"type": "message", "channel": CHANNEL, "ts": root},
            "event_ts": "2.0",
        }
    )

    [debate] = await bot.finished()
    assert "drop the read replica" in debate.question
    assert SURROGATE not in debate.spec_json
    assert errors_logged(caplog) == []


async def test_a_review_note_with_a_lone_surrogate_keeps_the_decision(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    request = await escalated(bot)
    await bot.driver.click(request, action_ids.ACTION_REJECT, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")

    note = {"note": {"type": "plain_text_input", "value": f"Not safe {SURROGATE} yet."}}
    submitted = await bot.driver.submit(view, note, user=REVIEWER)

    assert submitted.status == 200

    def stored() -> list[Review]:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Review)))

    [review] = await bot.wait_for(stored, "the stored review")
    assert (review.reviewer, review.decision, review.note) == (
        REVIEWER,
        "rejected",
        "Not safe \ufffd yet.",
    )
    decided = await bot.wait_for(
        lambda: next(
            (
                m
                for m in bot.emulator.posted(CHANNEL)
                if m["ts"] == request["ts"] and m.get("edited")
            ),
            None,
        ),
        "the decided review request",
    )
    assert f"Rejected by <@{REVIEWER}>" in str(decided["blocks"])
    assert errors_logged(caplog) == []


async def test_the_settings_form_with_a_lone_surrogate_is_saved_or_refused_by_field(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    await bot.driver.command("config", user=ADMIN)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "modal")

    values: dict[str, dict[str, Any]] = {
        "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
        "threshold": {"type": "plain_text_input", "value": "0.7"},
        "rounds": {"type": "plain_text_input", "value": "2"},
        "reaction": {"type": "plain_text_input", "value": f"mag{SURROGATE}"},
        "adr_pattern": {"type": "plain_text_input", "value": f"RFC-{SURROGATE}\\d+"},
    }
    refused = await bot.driver.submit(view, values, user=ADMIN)
    assert refused.status == 200
    assert set(refused.json()["errors"]) == {"reaction"}

    values["reaction"] = {"type": "plain_text_input", "value": "mag"}
    saved = await bot.driver.submit(view, values, user=ADMIN)
    assert saved.status == 200

    def settings() -> ChannelSettings | None:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            row = channels.channel_settings(session, channel_id=CHANNEL)
            return row if row.updated_by else None

    row = await bot.wait_for(settings, "the saved settings")
    assert (row.rounds, row.trigger_reaction, row.adr_pattern) == (2, "mag", "RFC-\ufffd\\d+")
    assert errors_logged(caplog) == []


async def test_socket_mode_drops_a_frame_nested_past_the_recursion_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'socket.sqlite3'}"
    # The command's work after its acknowledgement may still run when the debate row appears;
    # a grace lets it end before serve stops (with none, it is cut short and logged as an error).
    settings = socket_settings(emulator, url, post_interval_s=0, worker_poll_s=0.05).model_copy(
        update={"shutdown_grace_s": 5.0}
    )
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(settings, stop))
    engine = make_engine(url)

    def debates() -> list[Debate]:
        with session_scope(engine, workspace=WORKSPACE) as session:
            return list(session.exec(select(Debate)))

    try:
        await until(lambda: emulator.sockets, "the socket connection")
        await emulator.push_raw('{"envelope_id": "e1", "payload": ' + nested(100_000) + "}")
        await emulator.push("slash_commands", command(f"Should we adopt ADR-042 {SURROGATE}?", 1))
        await until(lambda: len(debates()) == 1, "the command after the bad frame")
        assert SURROGATE not in debates()[0].question
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)
        engine.dispose()
        await emulator.stop()
    assert "dropped a Socket Mode frame" in caplog.text
    assert errors_logged(caplog) == []
