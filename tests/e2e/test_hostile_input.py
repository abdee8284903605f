"""Hostile and broken requests at the bot's HTTP endpoint get a 4xx with a reason, never a
traceback; control characters and invisible questions are cleaned or refused; an event whose
handler failed is handled again when Slack retries it."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.messages import action_ids
from bot.store import channels, dedupe
from bot.store.db import session_scope
from tests.e2e.conftest import ADMIN, CHANNEL, BotFactory
from tests.e2e.driver import WORKSPACE

CLICK: dict[str, Any] = {
    "type": "block_actions",
    "team": {"id": "T1"},
    "user": {"id": "UALICE"},
    "api_app_id": "A1",
    "trigger_id": "t.1",
    "channel": {"id": CHANNEL},
    "actions": [{"action_id": action_ids.ACTION_APPROVE, "value": "1", "block_id": "b"}],
}
NOTE_VIEW: dict[str, Any] = {
    "type": "view_submission",
    "team": {"id": "T1"},
    "user": {"id": "UALICE"},
    "view": {
        "id": "V1",
        "type": "modal",
        "callback_id": action_ids.VIEW_REVIEW_NOTE,
        "private_metadata": "1:approved",
        "state": {"values": {}},
    },
}


def without(payload: dict[str, Any], *path: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    node = copy
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return copy


def replaced(payload: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    node: Any = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("payload=%7Bnot-json", "payload is not JSON"),
        (urlencode({"payload": "[1,2]"}), "payload is not a JSON object"),
        (urlencode({"payload": json.dumps(without(CLICK, "user"))}), "has no user"),
        (
            urlencode({"payload": json.dumps(replaced(CLICK, "abc", "actions", 0, "value"))}),
            "not a review request id",
        ),
        (urlencode({"payload": json.dumps(without(NOTE_VIEW, "view", "state"))}), "no state"),
        (
            urlencode(
                {"payload": json.dumps(replaced(NOTE_VIEW, "abc", "view", "private_metadata"))}
            ),
            "names no review request",
        ),
        (
            urlencode(
                {"payload": json.dumps(replaced(NOTE_VIEW, "1:nuke", "view", "private_metadata"))}
            ),
            "names no review request and decision",
        ),
    ],
)
async def test_signed_but_malformed_interactions_get_a_400(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, body: str, reason: str
) -> None:
    bot = await start_bot()

    reply = await bot.driver.send(body, "application/x-www-form-urlencoded")

    assert reply.status == 400
    assert reason in reply.body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"type": "message", "ts": "1.1", "text": "ADR-1: x"}, "no channel or ts"),
        ({"type": "message", "channel": CHANNEL, "text": "ADR-1: x"}, "no channel or ts"),
        (
            {
                "type": "reaction_added",
                "user": "U1",
                "reaction": "scales",
                "item": {"type": "message"},
            },
            "item has no channel or ts",
        ),
    ],
)
async def test_signed_but_malformed_events_get_a_400_and_stay_unhandled(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, event: dict[str, Any], reason: str
) -> None:
    bot = await start_bot()

    reply = await bot.driver.event(event, event_id="EvBroken")

    assert reply.status == 400
    assert reason in reply.body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert not dedupe.was_processed(session, key="event:EvBroken")


async def test_control_characters_are_cleaned_and_invisible_questions_refused(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()

    invisible = await bot.driver.command("\u200b\u200d\u2060\ufeff")
    await bot.driver.command("Adopt\x00 ADR\x07-042?")

    assert invisible.status == 200
    answer = await bot.wait_for(lambda: bot.emulator.responses, "the refusal")
    assert "the question is empty" in answer[0]["text"]
    [debate] = await bot.finished()
    assert debate.question == "Adopt ADR-042?"


async def test_an_event_whose_handler_failed_is_handled_when_slack_retries_it(
    start_bot: BotFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = await start_bot()
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"adr_watch": True}
        )
    starts = bot.runtime.surfaces.get(WORKSPACE).starts
    real = starts.start_from_adr
    failures: list[dict[str, Any]] = []

    async def fails_once(**kwargs: Any) -> Any:
        if not failures:
            failures.append(kwargs)
            raise RuntimeError("the database connection dropped mid-request")
        return await real(**kwargs)

    monkeypatch.setattr(starts, "start_from_adr", fails_once)
    adr = "ADR-042: Cache prices\nContext\nDecision\nConsequences"
    ts = bot.emulator.seed_message(CHANNEL, adr)
    event = {"type": "message", "channel": CHANNEL, "user": "UALICE", "ts": ts, "text": adr}

    assert (await bot.driver.event(event, event_id="EvRetry")).status == 200
    await bot.wait_for(lambda: failures, "the failed first delivery")
    await bot.driver.event(event, event_id="EvRetry", retry_num=1)

    [debate] = await bot.finished()
    assert debate.source == "adr"
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert dedupe.was_processed(session, key="event:EvRetry")
    again = await bot.driver.event(event, event_id="EvRetry", retry_num=2)
    assert again.status == 200
    assert len(bot.debates()) == 1


async def test_an_adversarial_adr_post_or_assistant_message_does_not_stall_the_bot(
    start_bot: BotFactory,
) -> None:
    """The outside report's Y-statement (88 s of backtracking for 5,500 characters, during
    which /healthz and every ack timed out), at Slack's 40,000-character message limit, posted
    in an ADR channel and in the assistant pane: the bot keeps answering."""
    bot = await start_bot()
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"adr_watch": True}
        )
    hostile = ("in the context of a facing b we decided c to achieve d " * 800)[:40_000]
    ts = bot.emulator.seed_message(CHANNEL, hostile)
    thread = bot.emulator.seed_message("DASSIST", "hi")

    async def answered_quickly() -> None:
        async with bot.driver.session.get(f"{bot.driver.bot_url}/healthz") as health:
            assert health.status == 200
        assert (await bot.driver.command("Should we adopt ADR-042?")).status == 200

    for sent in (
        bot.driver.event(
            {
                "type": "message",
                "channel": CHANNEL,
                "user": "UALICE",
                "text": hostile,
                "ts": ts,
                "channel_type": "channel",
            }
        ),
        bot.driver.assistant_message(
            hostile, channel="DASSIST", thread_ts=thread, ts=f"{thread}1", user="UALICE"
        ),
    ):
        assert (await asyncio.wait_for(sent, 10)).status == 200
        await asyncio.wait_for(answered_quickly(), 10)
