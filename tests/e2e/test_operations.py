"""Operating the bot (issue 15), as people in Slack and an operator's Prometheus see it: review
SLA expiry, the daily digest, monthly budgets, and /metrics."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import aiohttp
from sqlmodel import select

from bot.store.db import session_scope
from bot.store.tables import ChannelNotice, Escalation, ScheduledRun
from engine.models import Usage, utcnow
from engine.pricing import Pricing
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_reviews import escalated
from tests.helpers import DebateScript

OWNER = "UOWNER"


def later(bot: Bot, hours: float) -> object:
    """The bot's scheduled jobs with their clock `hours` ahead."""
    moment = utcnow() + timedelta(hours=hours)
    return dataclasses.replace(bot.runtime.jobs, clock=lambda: moment)


def escalation_state(bot: Bot) -> str:
    with session_scope(bot.engine) as session:
        (row,) = session.exec(select(Escalation))
        return row.state


async def test_a_review_past_its_sla_expires_in_the_thread_and_reaches_the_owners(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    await bot.driver.command(f"config set owners <@{OWNER}>", user=ADMIN)
    await bot.driver.command("config set review_sla 24", user=ADMIN)
    await escalated(bot)
    [debate] = bot.debates()

    early = later(bot, 23)
    assert await early.fire("review-sla", early.review_sla, 600) == "0 review(s) expired"
    late = later(bot, 25)
    assert await late.fire("review-sla", late.review_sla, 600) == "1 review(s) expired"
    assert await late.fire("review-sla", late.review_sla, 600) is None, "once per slot"
    assert escalation_state(bot) == "expired"

    notice = await bot.wait_for(
        lambda: next(
            (
                m
                for m in bot.emulator.in_thread(CHANNEL, debate.thread_ts)
                if "expired" in m["text"]
            ),
            None,
        ),
        "the expiry notice in the thread",
    )
    assert "within 24 h" in notice["text"]
    assert f"<@{REVIEWER}>" in notice["text"]
    dm = await bot.wait_for(lambda: bot.emulator.dms(OWNER), "the DM to the channel's owner")
    assert "expired" in dm[0]["text"]
    assert "owner of" in dm[0]["text"]

    again = later(bot, 26)
    assert await again.fire("review-sla", again.review_sla, 1) == "0 review(s) expired"
    await bot.finished()
    assert len(bot.emulator.dms(OWNER)) == 1, "an expired review is announced once"


async def test_the_daily_digest_goes_out_once_a_local_day_and_survives_a_slack_outage(
    start_bot: BotFactory,
) -> None:
    llm = DebateScript().llm(
        pricing=Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0),
        usage=Usage(input_tokens=100, output_tokens=100),
    )
    bot = await start_bot(llm=llm)
    await bot.driver.command("config set digest 00:00", user=ADMIN)
    await bot.driver.command("config set monthly_budget 40", user=ADMIN)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    bot.emulator.fail("chat.postMessage", Fault(status=503))
    jobs = later(bot, 0)
    detail = await jobs.fire("digest", jobs.digest, 300)
    assert detail == "1 digest(s) owed, 0 sent, 0 given up"
    assert not [m for m in bot.emulator.posted(CHANNEL) if "digest" in m["text"]]

    bot.emulator.heal()
    retry = later(bot, 0.2)
    assert await retry.fire("digest", retry.digest, 300) == "0 digest(s) owed, 1 sent, 0 given up"
    [digest] = [m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]]
    assert "Debates started: 1" in digest["text"]
    assert "Spend this month: $1.00 of the $40.00 monthly budget" in digest["text"]

    next_slot = later(bot, 0.4)
    assert await next_slot.fire("digest", next_slot.digest, 300) == (
        "0 digest(s) owed, 0 sent, 0 given up"
    )
    with session_scope(bot.engine) as session:
        assert len(session.exec(select(ChannelNotice)).all()) == 1
        runs = session.exec(select(ScheduledRun).where(ScheduledRun.job == "digest")).all()
    assert [run.outcome for run in runs] == ["ok", "ok", "ok"]


PRICED = Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0)
"""With 100 tokens in and out per call, a five-call debate costs $1.00."""


async def refusal_after(bot: Bot, question: str) -> dict:
    seen = len(bot.emulator.responses)
    await bot.driver.command(question)
    answers = await bot.wait_for(lambda: bot.emulator.responses[seen:], "the answer", limit_s=30)
    return answers[-1]


async def test_a_debate_that_could_pass_the_channels_monthly_budget_is_refused_unqueued(
    start_bot: BotFactory,
) -> None:
    llm = DebateScript().llm(pricing=PRICED, usage=Usage(input_tokens=100, output_tokens=100))
    bot = await start_bot(llm=llm)
    await bot.driver.command("config set monthly_budget 1.5", user=ADMIN)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    refusal = await refusal_after(bot, "Should we adopt ADR-043?")
    assert refusal["response_type"] == "ephemeral"
    text = refusal["text"]
    assert "This channel has spent $1.00 of its $1.50 monthly budget this month" in text
    assert "could cost up to $1.00, so nothing was queued" in text
    assert "`/debate config set monthly_budget 50`" in text
    assert len(bot.debates()) == 1

    await bot.driver.command("Should we adopt ADR-043? --budget 0.4")
    await bot.finished(2)


async def test_the_workspace_cap_holds_across_channels(start_bot: BotFactory) -> None:
    llm = DebateScript().llm(pricing=PRICED, usage=Usage(input_tokens=100, output_tokens=100))
    bot = await start_bot(llm=llm, workspace_monthly_budget_usd=1.5)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    refusal = await refusal_after(bot, "Should we adopt ADR-043?")
    assert "The workspace has spent $1.00 of its $1.50 monthly budget" in refusal["text"]
    assert "DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD" in refusal["text"]
    assert len(bot.debates()) == 1


async def test_metrics_count_debates_turns_tokens_and_slack_errors(start_bot: BotFactory) -> None:
    bot = await start_bot()
    bot.emulator.fail("chat.postMessage", Fault(status=503))
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{bot.driver.bot_url}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = await response.text()
    assert 'debatebot_debates_total{protocol="adversarial",status="COMPLETE"} 1.0' in text
    assert 'debatebot_turn_latency_seconds_count{model="fake-model",provider="fake"} 5.0' in text
    assert 'debatebot_tokens_total{kind="input",role="critic"}' in text
    assert "debatebot_critic_challenge_strength_count 1.0" in text
    errors = [line for line in text.splitlines() if line.startswith("debatebot_slack_api_errors_")]
    assert errors[0] == (
        'debatebot_slack_api_errors_total{code="internal_error",method="chat.postMessage"} 1.0'
    )
