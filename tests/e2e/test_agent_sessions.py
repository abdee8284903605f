"""Debates as Slack agent sessions, and stopping them from Slack (issue 44).

A debate's thread runs as an agent session (`processing` from its first turn, with the debate's
title; `active` at its end), and only the four statuses Slack accepts are ever sent. Slack's Stop
on the session (`agent_session_stopped`, over HTTP and Socket Mode) and the Stop button on the
debate's parent cancel it through the one cancel path: the requester, the channel's reviewers
and admins may; anyone else is refused privately and the debate runs on. The stopped plan ends
with who stopped it. An app Slack refuses sessions to (`not_authorized`, `unknown_method`) keeps
today's `assistant.threads.setStatus`, asked once per workspace; a manifest without the stop
event gets one warning with the fix.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.jobs.delivery.sessions import SUBSCRIBE_FIX
from bot.messages import action_ids
from bot.store import channels
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource, Debate, DebateState
from engine.models import DebateStatus
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault, SlackEmulator
from tests.e2e.slack_sessions import STATUSES, STOP_EVENT, manifest_events
from tests.e2e.test_assistant import DM, USER, ask, assistant_thread
from tests.e2e.test_socket_mode import command, event_envelope, socket_bot, until

REQUESTER = "UALICE"
STRANGER = "UBOB"
QUESTION = "Should we adopt ADR-042 for pricing?"


async def running(bot: Bot) -> Debate:
    """The one debate, once it runs and its session is processing."""
    await bot.wait_for(
        lambda: [d for d in bot.debates() if d.state == DebateState.RUNNING],
        "the running debate",
    )
    sessions = bot.emulator.agent_sessions.sessions
    await bot.wait_for(
        lambda: any(s.status == "processing" for s in sessions.values()),
        "its agent session processing",
    )
    return bot.debates()[0]


def parent_of(emulator: SlackEmulator, debate_id: int) -> dict[str, Any] | None:
    """The debate's parent as Slack has it now (None before it is posted)."""
    return next(
        (
            m
            for m in emulator.posted(CHANNEL)
            if m["text"].startswith(f"Debate #{debate_id}:") and "thread_ts" not in m
        ),
        None,
    )


def stop_buttons(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert message is not None, "the parent was posted"
    return [
        e
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e.get("action_id") == action_ids.ACTION_STOP
    ]


def plan_end(emulator: SlackEmulator) -> str:
    """The plan's message as it ended (streamed, or changed as a message once Slack stopped
    its stream), as text."""
    [plan] = emulator.streams(CHANNEL)
    return json.dumps(plan.get("blocks") or [])


async def told(bot: Bot, user: str, before: int) -> str:
    """What the bot told `user` alone after `before` ephemeral messages."""
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > before, f"the answer to {user}")
    answer = bot.emulator.ephemeral[-1]
    assert answer["user"] == user
    return str(answer["text"])


async def test_stop_on_the_session_over_http_stops_the_debate_and_says_who(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 60  # every call outlasts the test unless the cancel abandons it
    await bot.driver.command(QUESTION, user=REQUESTER)
    debate = await running(bot)
    assert debate.thread_ts is not None
    session = bot.emulator.agent_sessions.sessions[(CHANNEL, debate.thread_ts)]
    assert session.title == f"Debate #{debate.id}: {QUESTION}"
    assert stop_buttons(parent_of(bot.emulator, debate.id or 0)), "Stop under the parent"

    before = len(bot.emulator.ephemeral)
    refused = bot.emulator.press_stop(CHANNEL, debate.thread_ts, STRANGER)
    assert (await bot.driver.event(refused)).status == 200
    refusal = await told(bot, STRANGER, before)
    assert f"Only the person who asked for debate #{debate.id}" in refusal
    assert bot.debates()[0].cancel_requested_at is None, "the debate runs on"
    assert bot.debates()[0].state == DebateState.RUNNING

    event = bot.emulator.press_stop(CHANNEL, debate.thread_ts, REQUESTER)
    assert event["type"] == STOP_EVENT
    before = len(bot.emulator.ephemeral)
    assert (await bot.driver.event(event)).status == 200
    assert "is stopping" in await told(bot, REQUESTER, before)
    [ended] = await bot.finished()
    assert ended.outcome == DebateStatus.CANCELLED
    assert (ended.cancelled_by, ended.cancelled_from) == (REQUESTER, CancelSource.SLACK_STOP)
    assert session.statuses[0] == "processing"
    assert session.status == "active", "the ending moves the session out of processing"
    assert f"was stopped by <@{REQUESTER}> with Slack's Stop button" in plan_end(bot.emulator)
    assert stop_buttons(parent_of(bot.emulator, ended.id or 0)) == [], "no Stop once it ended"


async def test_stop_on_the_session_over_socket_mode(tmp_path: Path) -> None:
    async with socket_bot(tmp_path, fake_delay_s=60) as bot:
        emulator = bot.emulator
        await emulator.push("slash_commands", command(QUESTION, 1))
        [debate] = await until(
            lambda: [d for d in bot.debates() if d.state == DebateState.RUNNING and d.thread_ts],
            "the running debate",
        )
        thread_ts = debate.thread_ts or ""
        session = await until(
            lambda: emulator.agent_sessions.sessions.get((CHANNEL, thread_ts)),
            "its agent session",
        )
        pressed = emulator.press_stop(CHANNEL, thread_ts, REQUESTER)
        envelope = event_envelope(pressed, "EvStop1")
        await emulator.push("events_api", envelope, retry_attempt=0, retry_reason="")
        [ended] = await until(
            lambda: [d for d in bot.debates() if d.state == DebateState.FINISHED],
            "the stopped debate",
        )
        assert ended.outcome == DebateStatus.CANCELLED
        assert (ended.cancelled_by, ended.cancelled_from) == (REQUESTER, CancelSource.SLACK_STOP)
        await until(lambda: session.status == "active", "the session out of processing")


async def test_the_stop_button_for_the_requester_and_a_reviewer_not_a_stranger(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"reviewers": [REVIEWER]}
        )
    bot.llm.delay_s = 60
    await bot.driver.command(QUESTION, user=REQUESTER)
    first = await running(bot)
    parent = await bot.wait_for(lambda: parent_of(bot.emulator, first.id or 0), "its parent")

    before = len(bot.emulator.ephemeral)
    await bot.driver.click(parent, action_ids.ACTION_STOP, user=STRANGER)
    assert "Only the person who asked" in await told(bot, STRANGER, before)
    assert bot.debates()[0].cancel_requested_at is None, "the debate runs on"

    before = len(bot.emulator.ephemeral)
    await bot.driver.click(parent, action_ids.ACTION_STOP, user=REQUESTER)
    assert f"Debate #{first.id} is stopping" in await told(bot, REQUESTER, before)
    await bot.finished()

    await bot.driver.command("Should we move sessions to Redis?", user=REQUESTER)
    second = await bot.wait_for(
        lambda: next((d for d in bot.debates()[1:] if d.state == DebateState.RUNNING), None),
        "the second debate running",
    )
    parent = await bot.wait_for(lambda: parent_of(bot.emulator, second.id or 0), "its parent")
    before = len(bot.emulator.ephemeral)
    await bot.driver.click(parent, action_ids.ACTION_STOP, user=REVIEWER)
    assert "is stopping" in await told(bot, REVIEWER, before)
    ended = await bot.finished(2)
    assert [(d.outcome, d.cancelled_by, d.cancelled_from) for d in ended] == [
        (DebateStatus.CANCELLED, REQUESTER, CancelSource.SLACK_STOP),
        (DebateStatus.CANCELLED, REVIEWER, CancelSource.SLACK_STOP),
    ]
    assert stop_buttons(parent_of(bot.emulator, second.id or 0)) == [], "gone at the end"


async def test_every_status_sent_in_a_full_debate_is_one_of_slacks_four(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    await bot.driver.command(QUESTION, user=REQUESTER)
    [debate] = await bot.finished()
    assert debate.outcome == DebateStatus.COMPLETE
    sent = bot.emulator.session_statuses()
    assert sent, "the debate ran as an agent session"
    assert set(sent) <= STATUSES, sent
    assert (sent[0], sent[-1]) == ("processing", "active")
    assert all(c.status == 200 for c in bot.emulator.calls_of("agents.sessions.setStatus"))


@pytest.mark.parametrize(
    ("declared", "available", "code"),
    [(False, True, "not_authorized"), (True, False, "unknown_method")],
)
async def test_without_agent_sessions_the_assistant_status_is_used_asked_once(
    start_bot: BotFactory,
    caplog: pytest.LogCaptureFixture,
    declared: bool,
    available: bool,
    code: str,
) -> None:
    bot = await start_bot()
    bot.emulator.agent_sessions.declared = declared
    bot.emulator.agent_sessions.available = available
    caplog.set_level(logging.WARNING, logger="bot.jobs.delivery.sessions")
    await ask(bot, "Should we adopt ADR-042?", assistant_thread(bot))
    await bot.finished()
    await ask(bot, "Should we move sessions to Redis?", assistant_thread(bot))
    await bot.finished(2)

    tried = bot.emulator.calls_of("agents.sessions.setStatus", ok_only=False)
    assert [c.answer and c.answer.get("error") for c in tried] == [code], "asked once"
    statuses = [c["status"] for c in bot.emulator.assistant_calls("assistant.threads.setStatus")]
    assert any(s for s in statuses), "who is speaking, in the assistant pane"
    assert statuses.count("") == 2, "each debate's status cleared at its end"
    assert bot.emulator.agent_sessions.sessions == {}
    refused = [r for r in caplog.records if "refused agents.sessions.setStatus" in r.message]
    assert [r.levelno for r in refused] == [logging.WARNING]
    assert code in refused[0].message
    metric = bot.runtime.metrics.session_refusals.labels("processing", code)
    assert metric._value.get() == 1


async def test_a_manifest_without_the_stop_event_is_warned_once_with_the_fix(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    bot.emulator.agent_sessions.bot_events = manifest_events() - {STOP_EVENT}
    caplog.set_level(logging.WARNING, logger="bot.jobs.delivery.sessions")
    await bot.driver.command(QUESTION, user=REQUESTER)
    await bot.driver.command("Should we move sessions to Redis?", user=REQUESTER)
    await bot.finished(2)
    answers = [c.answer or {} for c in bot.emulator.calls_of("agents.sessions.setStatus")]
    assert len(answers) == 4
    assert all(a.get("warning") for a in answers)
    warned = [r for r in caplog.records if r.message == SUBSCRIBE_FIX]
    assert len(warned) == 1
    assert "agent_session_stopped" in warned[0].message


def test_the_shipped_manifest_subscribes_to_the_stop_event() -> None:
    assert STOP_EVENT in manifest_events()


async def test_an_assistant_debate_stopped_from_its_session(start_bot: BotFactory) -> None:
    """In the assistant pane too: the session is the assistant thread's."""
    bot = await start_bot()
    bot.llm.delay_s = 60
    root = assistant_thread(bot)
    await ask(bot, QUESTION, root)
    await bot.wait_for(
        lambda: (
            (s := bot.emulator.agent_sessions.sessions.get((DM, root))) and s.status == "processing"
        ),
        "the assistant thread's session processing",
    )
    await bot.driver.event(bot.emulator.press_stop(DM, root, USER))
    [ended] = await bot.finished()
    assert (ended.outcome, ended.cancelled_by) == (DebateStatus.CANCELLED, USER)
    assert bot.emulator.agent_sessions.sessions[(DM, root)].status == "active"


async def test_a_status_slack_refuses_as_invalid_is_a_warning_and_a_count(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Should Slack stop accepting a status (`invalid_arguments`), it is said, not swallowed:
    a WARNING, a count, the status given up; the debate is posted whole all the same."""
    bot = await start_bot()
    bot.emulator.fail("agents.sessions.setStatus", Fault(error="invalid_arguments"))
    caplog.set_level(logging.WARNING, logger="bot.jobs.delivery.sessions")
    await bot.driver.command(QUESTION, user=REQUESTER)
    [debate] = await bot.finished()
    assert debate.outcome == DebateStatus.COMPLETE
    assert any(m["text"].startswith("Verdict") for m in bot.emulator.posted(CHANNEL))
    [warning] = [
        r
        for r in caplog.records
        if r.name == "bot.jobs.delivery.sessions" and "invalid_arguments" in r.message
    ]
    assert warning.levelno == logging.WARNING
    assert "'processing'" in warning.message
    metric = bot.runtime.metrics.session_refusals.labels("processing", "invalid_arguments")
    assert metric._value.get() == 1
