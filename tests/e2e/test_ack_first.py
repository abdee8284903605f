"""Slack is answered first, on one pooled session: a request is acknowledged before any check
that needs Slack or the store, whose outcome follows (through `response_url`, privately or by
DM) in the words the acknowledgement used to carry; every Slack call of the process shares a
few kept-alive connections; and stopping finishes the work Slack was already answered for
before it closes that session."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.e2e.conftest import CHANNEL, BotFactory

NOT_IN_CHANNEL = (
    ":warning: I am not in this channel, so I could not post the debate here (not_in_channel)."
    " Run `/invite @debatebot` and ask again"
)
"""What a person asking in a channel the bot is not in was told before, word for word."""
SLOW_S = 1.5
"""How late Slack answers `conversations.info` (under the directory's 2 s bound)."""
FORM: dict[str, dict[str, Any]] = {
    "question": {"type": "plain_text_input", "value": "Adopt ADR-042?"},
    "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
    "rounds": {"type": "plain_text_input", "value": "1"},
}


async def test_slack_calls_share_at_most_the_pool_s_connections(start_bot: BotFactory) -> None:
    bot = await start_bot(
        slack_connections=4,
        worker_concurrency=0,
        max_debates_per_user=100,
        max_debates_per_channel=100,
    )
    channels = [f"CPOOL{n}" for n in range(4)]

    replies = await asyncio.gather(
        *(
            bot.driver.command(f"Should we adopt ADR-{n:03}?", channel=channels[n % 4])
            for n in range(40)
        )
    )
    replies.append(await bot.driver.command("help"))

    assert all((reply.status, reply.body) == (200, "") for reply in replies)
    await bot.wait_for(
        lambda: sum(len(bot.emulator.posted(channel)) for channel in channels) == 40,
        "the 40 parents",
    )
    await bot.wait_for(lambda: bot.emulator.responses, "the help")
    assert len(bot.emulator.calls_of("conversations.info")) == 40
    assert len(bot.emulator.calls) + len(bot.emulator.responses) >= 80
    assert 1 <= bot.emulator.connections <= 4


async def test_a_slow_membership_check_follows_the_ack_through_the_response_url(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.emulator.outside.add(CHANNEL)
    bot.emulator.delays["conversations.info"] = SLOW_S

    reply = await bot.driver.command("Should we adopt ADR-042?")

    assert (reply.status, reply.body) == (200, "")
    assert bot.emulator.responses == []  # answered before Slack answered the check
    [answer] = await bot.wait_for(lambda: bot.emulator.responses, "the refusal")
    assert answer == {"text": NOT_IN_CHANNEL, "response_type": "ephemeral"}
    assert bot.debates() == []


async def test_the_debate_form_closes_at_once_and_its_slow_check_is_told_after(
    start_bot: BotFactory,
) -> None:
    """The form used to wait for the check and show its refusal under the question; it now
    closes, and the same words come by DM where the bot cannot post even an ephemeral."""
    bot = await start_bot()
    await bot.driver.command("")
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "the form")
    bot.emulator.outside.add(CHANNEL)
    bot.emulator.delays["conversations.info"] = SLOW_S

    submitted = await bot.driver.submit(view, FORM, user="UALICE")

    assert (submitted.status, submitted.body) == (200, "")
    assert bot.emulator.dms("UALICE") == []
    [told] = await bot.wait_for(lambda: bot.emulator.dms("UALICE"), "the refusal")
    assert told["text"] == NOT_IN_CHANNEL
    assert bot.debates() == []

    bot.emulator.outside.clear()
    again = await bot.driver.submit({**view, "id": "V2"}, FORM, user="UALICE")

    assert (again.status, again.body) == (200, "")
    [debate] = await bot.wait_for(bot.debates, "the debate")
    assert (debate.source, debate.question) == ("modal", "Adopt ADR-042?")


async def test_stopping_finishes_what_slack_was_answered_for_then_closes_the_session(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(worker_concurrency=0, shutdown_grace_s=10.0)
    http = bot.runtime.work.slack_http
    assert http is not None
    bot.emulator.delays["conversations.info"] = 0.5

    reply = await bot.driver.command("Should we adopt ADR-042?")
    assert (reply.status, bot.debates()) == (200, [])
    await bot.runtime.stop()

    [debate] = bot.debates()
    assert debate.question == "Should we adopt ADR-042?"
    assert http.closed


async def test_stopping_past_the_grace_names_the_request_it_cut_short(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot(worker_concurrency=0, shutdown_grace_s=0.2)
    bot.emulator.delays["conversations.info"] = SLOW_S

    reply = await bot.driver.command("Should we adopt ADR-042?", user="UBOB")
    assert reply.status == 200
    with caplog.at_level(logging.ERROR, logger="bot.slack.after_ack"):
        await bot.runtime.stop()

    [record] = [r for r in caplog.records if r.name == "bot.slack.after_ack"]
    assert "/debate by UBOB in CDEBATE" in record.getMessage()
    assert "the person should ask again" in record.getMessage()
    assert bot.debates() == []
