"""Feedback on verdicts: Slack's thumbs up and down under every verdict, one stored row per
person and debate (a change of mind overwrites it), shown in App Home and counted per protocol;
a forged or misplaced click records nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from bot.slack import failures
from bot.store import overview, reviews
from bot.store.db import session_scope
from bot.store.errors import DatabaseUnavailableError
from bot.store.review_tables import Feedback
from tests.e2e.conftest import CHANNEL, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault


async def verdict_message(bot: Bot) -> dict[str, Any]:
    [debate] = await bot.finished()
    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    pages = [m for m in thread if m["text"].startswith("Verdict")]
    assert pages, "the verdict was posted"
    last = pages[-1]
    assert any(b["type"] == "context_actions" for b in last["blocks"])
    return last


def stored(bot: Bot) -> list[tuple[str, str]]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        rows = session.exec(select(Feedback).order_by(Feedback.user_id))
        return [(row.user_id, row.value) for row in rows]


def told(bot: Bot, user: str) -> list[str]:
    return [e["text"] for e in bot.emulator.ephemeral if e.get("user") == user]


async def test_each_person_has_one_row_and_a_change_of_mind_overwrites_it(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    await bot.driver.command("Should we adopt ADR-042?")
    verdict = await verdict_message(bot)

    assert (await bot.driver.feedback(verdict, True, user="UALICE")).status == 200
    await bot.wait_for(lambda: stored(bot) == [("UALICE", "positive")], "alice's thumbs up")
    await bot.driver.feedback(verdict, True, user="UALICE")
    await bot.wait_for(lambda: len(told(bot, "UALICE")) == 2, "the second answer")
    assert "Thanks, noted" in told(bot, "UALICE")[0]
    assert "Already noted" in told(bot, "UALICE")[1]
    await bot.driver.feedback(verdict, False, user="UALICE")
    await bot.driver.feedback(verdict, True, user="UBOB")
    await bot.wait_for(
        lambda: stored(bot) == [("UALICE", "negative"), ("UBOB", "positive")],
        "alice's change of mind and bob's vote",
    )
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        [stats] = overview.protocol_stats(session)
    assert (stats.protocol, stats.positive, stats.negative) == ("adversarial", 1, 1)

    bot.emulator.user_channels["UALICE"] = [CHANNEL]
    await bot.driver.event({"type": "app_home_opened", "user": "UALICE", "tab": "home"})
    [home] = await bot.wait_for(lambda: bot.emulator.published, "the published home")
    text = str(home["view"]["blocks"])
    assert ":+1: 1 :-1: 1" in text
    assert "Verdict feedback by protocol" in text


async def test_a_forged_or_misplaced_click_records_nothing(start_bot: BotFactory) -> None:
    bot = await start_bot()
    await bot.driver.command("Should we adopt ADR-042?")
    verdict = await verdict_message(bot)
    [debate] = bot.debates()
    parent = next(m for m in bot.emulator.posted(CHANNEL) if m["ts"] == debate.thread_ts)

    # The right shape, but not from the debate's verdict: another debate's id, or the parent.
    await bot.driver.feedback(verdict, True, user="UMALLORY", value="positive:99")
    await bot.driver.feedback({**parent, "blocks": verdict["blocks"]}, True, user="UMALLORY")
    await bot.wait_for(lambda: len(told(bot, "UMALLORY")) == 2, "two refusals")
    assert all(":no_entry:" in text for text in told(bot, "UMALLORY"))
    # A value that is no feedback at all is refused before any listener runs.
    refused = await bot.driver.feedback(verdict, True, user="UMALLORY", value="positive:1;drop")
    assert refused.status == 400
    assert stored(bot) == []


async def test_a_click_is_stored_when_its_thanks_cannot_be_sent(start_bot: BotFactory) -> None:
    """Slack answering 500 to the ephemeral thanks: the click is acknowledged and stored."""
    bot = await start_bot()
    await bot.driver.command("Should we adopt ADR-042?")
    verdict = await verdict_message(bot)
    bot.emulator.fail("chat.postEphemeral", Fault(status=500))
    reply = await bot.driver.feedback(verdict, True, user="UALICE")
    assert reply.status == 200
    await bot.wait_for(lambda: stored(bot) == [("UALICE", "positive")], "the stored click")


async def test_a_click_while_the_store_is_down_is_told_so(
    start_bot: BotFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = await start_bot()
    await bot.driver.command("Should we adopt ADR-042?")
    verdict = await verdict_message(bot)

    def down(*_: Any, **__: Any) -> None:
        raise DatabaseUnavailableError("the database is unavailable")

    monkeypatch.setattr(reviews, "record_feedback", down)
    reply = await bot.driver.feedback(verdict, True, user="UALICE")
    assert reply.status == 200
    # The click's response_url carries the answer, as for a command.
    [answer] = await bot.wait_for(lambda: bot.emulator.responses, "the answer")
    assert answer["text"] == failures.STORE_DOWN
    assert stored(bot) == []
