"""A bot token Slack refuses (revoked, invalid, missing a scope) is no message's fault: delivery
pauses with everything still owed, no new debate is claimed or accepted, `/healthz` says so,
and once the token answers again every owed message goes out, review requests among them, each
once. At start-up a refused token stops `serve` with the setting named."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot.serving import serve
from bot.settings import SettingsError
from bot.store import outbox, reviews
from bot.store.db import session_scope
from bot.store.outbox_tables import OutboxState
from tests.e2e.conftest import CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault, SlackEmulator
from tests.e2e.test_slack_failures import with_reviewer
from tests.e2e.test_socket_mode import socket_settings


def settled_states(bot: Bot) -> set[str]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return {
            row.state
            for debate in bot.debates()
            for row in outbox.rows_of(session, debate_id=debate.id or 0)
        }


@pytest.mark.parametrize("code", ["token_revoked", "invalid_auth", "account_inactive"])
async def test_a_refused_token_pauses_delivery_and_everything_owed_goes_out_once_it_works(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, code: str
) -> None:
    caplog.set_level(logging.ERROR)
    bot = await start_bot()
    with_reviewer(bot)
    bot.llm.delay_s = 0.2
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.fail_for("*", Fault(error=code), seconds=4)

    # The debate finishes and escalates while every call is refused.
    await bot.wait_for(
        lambda: all(d.state == "finished" for d in bot.debates()), "the debate's end"
    )
    _, report = await bot.wait_for_health(503)
    assert report["slack"] == "token refused (DEBATEBOT_SLACK_BOT_TOKEN)"
    assert OutboxState.FAILED not in settled_states(bot), "nothing is given up"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("DEBATEBOT_SLACK_BOT_TOKEN" in e and code in e for e in errors)

    # A new request is refused with the reason, and nothing is queued or paid for.
    await bot.driver.command("Should we also adopt ADR-043?")
    answer = await bot.wait_for(
        lambda: [r for r in bot.emulator.responses if "refused my bot token" in r["text"]],
        "the refusal",
    )
    assert "nothing was queued" in answer[0]["text"]
    assert len(bot.debates()) == 1

    # The token works again: every owed message is delivered once, the review request too.
    [debate] = await bot.finished(limit_s=60)
    assert debate.id is not None
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        escalation = reviews.escalation_for(session, debate_id=debate.id)
        review = outbox.row_for(session, debate_id=debate.id, key="review")
    assert escalation is not None
    assert review is not None
    assert review.state == OutboxState.SENT
    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    requests = [m for m in thread if "Review needed" in m["text"]]
    assert len(requests) == 1
    verdicts = [m for m in thread if "Verdict of debate" in str(m["blocks"])]
    assert len(verdicts) == 1
    assert (await bot.driver.health())[0] == 200
    assert REVIEWER in str(requests[0]["blocks"])


async def test_a_missing_scope_names_the_scope(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    bot = await start_bot()
    bot.llm.delay_s = 0.2
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.fail_for("*", Fault(error="missing_scope", needed="chat:write.public"), 3)

    await bot.wait_for_health(503)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("`chat:write.public` scope" in e for e in errors)
    await bot.finished(limit_s=60)
    assert OutboxState.FAILED not in settled_states(bot)


async def test_no_debate_is_claimed_while_the_token_is_refused(start_bot: BotFactory) -> None:
    """A request admitted as the refusals begin (its reachability check is the first call to be
    refused) waits in the queue, unclaimed and unpaid, and runs once the token works."""
    bot = await start_bot()
    # The window outlasts a slow machine's wait for the queued row and the second after it, so
    # the check below looks inside it.
    bot.emulator.fail_for("*", Fault(error="token_revoked"), seconds=6.0)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(bot.debates, "the queued debate")
    await asyncio.sleep(1.0)
    assert [d.state for d in bot.debates()] == ["queued"]

    [debate] = await bot.finished(limit_s=60)
    assert debate.state == "finished"


async def test_serve_stops_at_start_up_when_slack_refuses_the_bot_token(tmp_path: Path) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    try:
        emulator.fail_for("auth.test", Fault(error="invalid_auth"), seconds=30)
        with pytest.raises(SettingsError, match=r"DEBATEBOT_SLACK_BOT_TOKEN \(invalid_auth\)"):
            await serve(
                socket_settings(emulator, f"sqlite:///{tmp_path}/s.sqlite3"), asyncio.Event()
            )
    finally:
        await emulator.stop()


async def test_serve_starts_when_slack_cannot_be_asked_about_the_token(tmp_path: Path) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    stop = asyncio.Event()
    try:
        emulator.fail_for("auth.test", Fault(status=503), seconds=30)
        settings = socket_settings(emulator, f"sqlite:///{tmp_path}/s.sqlite3")
        serving = asyncio.create_task(serve(settings, stop))
        await asyncio.sleep(1.0)
        assert not serving.done(), "a network failure is no refusal"
        stop.set()
        await asyncio.wait_for(serving, 30)
    finally:
        await emulator.stop()
