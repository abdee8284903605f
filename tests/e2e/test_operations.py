"""Operating the bot (issue 15), as people in Slack and an operator's Prometheus see it: review
SLA expiry, the daily digest, monthly budgets, and /metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import pytest
from sqlmodel import col, select

from bot.jobs.scheduled import ScheduledJobs
from bot.messages import action_ids
from bot.store.db import session_scope
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.review_tables import Escalation
from bot.store.schedule_tables import ScheduledRun
from engine.llm import LLMRequest
from engine.models import Usage, utcnow
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM
from tests.e2e.conftest import CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_fault_schedules import random_fault
from tests.e2e.test_reviews import NOTE, configured, escalated
from tests.helpers import DebateScript

OWNER = "UOWNER"


def later(bot: Bot, hours: float) -> ScheduledJobs:
    """The bot's scheduled jobs with their clock `hours` ahead."""
    return at(bot, utcnow() + timedelta(hours=hours))


def at(bot: Bot, moment: datetime) -> ScheduledJobs:
    """The bot's scheduled jobs with their clock at `moment`."""
    return dataclasses.replace(bot.runtime.jobs, clock=lambda: moment)


def escalation_state(bot: Bot) -> str:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        (row,) = session.exec(select(Escalation))
        return row.state


async def test_a_review_past_its_sla_expires_in_the_thread_and_reaches_the_owners(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    await configured(bot, f"owners <@{OWNER}>")
    await configured(bot, "review_sla 24")
    await escalated(bot)
    [debate] = bot.debates()

    early = later(bot, 23)
    assert await early.fire("review-sla", early.review_sla, 600) == "0 review(s) expired"
    late = later(bot, 25)
    assert await late.fire("review-sla", late.review_sla, 600) == "1 review(s) expired"
    assert await late.fire("review-sla", late.review_sla, 600) is None, "once per slot"
    assert escalation_state(bot) == "expired"

    assert debate.thread_ts is not None
    notice = await bot.in_thread(debate.thread_ts, "expired", "the expiry notice in the thread")
    assert "within 24 h" in notice["text"]
    assert f"<@{REVIEWER}>" in notice["text"]
    dm = await bot.wait_for(lambda: bot.emulator.dms(OWNER), "the DM to the channel's owner")
    assert "expired" in dm[0]["text"]
    assert "owner of" in dm[0]["text"]

    again = later(bot, 26)
    assert await again.fire("review-sla", again.review_sla, 1) == "0 review(s) expired"
    await bot.finished()
    assert len(bot.emulator.dms(OWNER)) == 1, "an expired review is announced once"


PRICED = Pricing(input_per_mtok=0.0, output_per_mtok=100.0)
PRICED_USAGE = Usage(input_tokens=100, output_tokens=1_000)
"""Each call costs $0.10 and could cost $0.1024 (its 1,024 max_tokens), so the canned debate's
six calls (five turns and the independent judge) fit the default $1 budget and cost $0.60."""


async def test_the_daily_digest_goes_out_once_a_local_day_and_survives_a_slack_outage(
    start_bot: BotFactory,
) -> None:
    """The digest is an outbox row with no debate, delivered by the one delivery loop: a 5xx
    window is waited out with the backoff every message has, and it is posted once."""
    llm = DebateScript().llm(pricing=PRICED, usage=PRICED_USAGE)
    bot = await start_bot(llm=llm)
    await configured(bot, "digest 00:00")
    await configured(bot, "monthly_budget 40")
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    bot.emulator.fail_for("chat.postMessage", Fault(status=503), 1.0)
    jobs = later(bot, 0)
    assert await jobs.fire("digest", jobs.digest, 300) == "1 digest(s) owed"
    [digest] = await bot.wait_for(
        lambda: [m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]],
        "the digest, once Slack answers again",
    )
    assert "Debates started: 1" in digest["text"]
    assert "Spend this month: $0.60 of the $40.00 monthly budget" in digest["text"]
    failed = [
        c for c in bot.emulator.calls_of("chat.postMessage", ok_only=False) if c.status == 503
    ]
    assert failed, "it met the outage first"

    next_slot = later(bot, 0.4)
    assert await next_slot.fire("digest", next_slot.digest, 300) == "0 digest(s) owed"
    await bot.finished()
    digests = [m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]]
    assert len(digests) == 1
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        [row] = session.exec(select(Outbox).where(col(Outbox.debate_id).is_(None))).all()
        runs = session.exec(select(ScheduledRun).where(ScheduledRun.job == "digest")).all()
    assert (row.key, row.state, row.target) == (
        f"digest:{CHANNEL}:{row.key[-10:]}",
        "sent",
        "channel",
    )
    assert [run.outcome for run in runs] == ["ok", "ok"]


async def test_the_digest_honours_retry_after_and_gives_up_a_channel_it_cannot_post_in(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The same Slack faults the other messages meet: a 429's Retry-After is waited out as
    given; `not_in_channel` gives the digest up, logged, with no thread to tell."""
    bot = await start_bot()
    await configured(bot, "digest 00:00")
    bot.emulator.fail("chat.postMessage", Fault(status=429, error="ratelimited", retry_after=1))
    jobs = later(bot, 0)
    assert await jobs.fire("digest", jobs.digest, 300) == "1 digest(s) owed"
    await bot.wait_for(
        lambda: [m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]],
        "the digest after the rate limit",
    )
    calls = bot.emulator.calls_of("chat.postMessage", ok_only=False)
    refused = next(c for c in calls if c.status == 429)
    took = next(c for c in calls if c.status == 200 and c.at > refused.at)
    assert took.at - refused.at >= 1.0, "Retry-After is honoured"

    bot.emulator.fail("chat.postMessage", Fault(error="not_in_channel"))
    tomorrow = later(bot, 24)
    assert await tomorrow.fire("digest", tomorrow.digest, 300) == "1 digest(s) owed"

    def given_up() -> list[Outbox]:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            return list(
                session.exec(
                    select(Outbox).where(
                        col(Outbox.debate_id).is_(None), Outbox.state == OutboxState.FAILED
                    )
                )
            )

    [failed] = await bot.wait_for(given_up, "the refused digest given up")
    assert failed.last_error == "refused by Slack: not_in_channel"
    assert f"channel {CHANNEL}: {failed.key} not delivered" in caplog.text
    assert len([m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]]) == 1


async def refusal_after(bot: Bot, question: str) -> dict[str, Any]:
    seen = len(bot.emulator.responses)
    await bot.driver.command(question)
    answers: list[dict[str, Any]] = await bot.wait_for(
        lambda: bot.emulator.responses[seen:], "the answer", limit_s=30
    )
    return answers[-1]


async def test_a_debate_that_could_pass_the_channels_monthly_budget_is_refused_unqueued(
    start_bot: BotFactory,
) -> None:
    llm = DebateScript().llm(pricing=PRICED, usage=PRICED_USAGE)
    bot = await start_bot(llm=llm)
    await configured(bot, "monthly_budget 1.2")
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    refusal = await refusal_after(bot, "Should we adopt ADR-043?")
    assert refusal["response_type"] == "ephemeral"
    text = refusal["text"]
    assert "This channel has spent $0.60 of its $1.20 monthly budget this month" in text
    assert "could cost up to $1.00, so nothing was queued" in text
    assert "`/debate config set monthly_budget 50`" in text
    assert len(bot.debates()) == 1

    await bot.driver.command("Should we adopt ADR-043? --budget 0.4")
    await bot.finished(2)


async def test_the_workspace_cap_holds_across_channels(start_bot: BotFactory) -> None:
    llm = DebateScript().llm(pricing=PRICED, usage=PRICED_USAGE)
    bot = await start_bot(llm=llm, workspace_monthly_budget_usd=1.2)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()

    refusal = await refusal_after(bot, "Should we adopt ADR-043?")
    assert "The workspace has spent $0.60 of its $1.20 monthly budget" in refusal["text"]
    assert "DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD" in refusal["text"]
    assert len(bot.debates()) == 1


async def test_a_budget_that_cannot_pay_the_first_call_says_so_in_the_thread(
    start_bot: BotFactory,
) -> None:
    """Every call here could cost $0.1024: a $0.05 debate asks nothing of the model, and its
    verdict says what the first call could cost and how to raise the budget."""
    llm = DebateScript().llm(pricing=PRICED, usage=PRICED_USAGE)
    bot = await start_bot(llm=llm)
    await bot.driver.command("Should we adopt ADR-042? --budget 0.05")
    [debate] = await bot.finished()

    assert llm.calls == []
    assert debate.state == "finished"
    verdict = await bot.in_thread(debate.thread_ts or "", "Verdict", "the verdict")
    text = str(verdict["blocks"])
    assert "Stopped at the budget ceiling" in text
    assert "nothing was spent: the framing call to fake:fake-model could cost up to $0.1024" in text
    assert "more than the whole $0.05 budget" in text
    assert "Raise the budget to at least $0.11 (--budget 0.11;" in text
    assert "cost $0.0000" in text


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
    assert 'debatebot_turn_latency_seconds_count{model="fake-model",provider="fake"} 6.0' in text
    assert 'debatebot_tokens_total{kind="input",role="critic"}' in text
    assert "debatebot_critic_challenge_strength_count 1.0" in text
    errors = [line for line in text.splitlines() if line.startswith("debatebot_slack_api_errors_")]
    assert errors[0] == (
        'debatebot_slack_api_errors_total{code="internal_error",method="chat.postMessage"} 1.0'
    )


@pytest.mark.parametrize("seed", range(3))
async def test_expiry_and_digest_are_delivered_once_under_random_slack_faults(
    start_bot: BotFactory, seed: int
) -> None:
    """Invariants under a seeded schedule of transient Slack faults while the jobs run in
    slot after slot: an expired review is announced once in its thread and once to each
    owner, and a channel gets one digest a local day, once Slack recovers."""
    rng = random.Random(seed)
    bot = await start_bot(slack_timeout_s=1.0)
    await configured(bot, f"owners <@{OWNER}>")
    await configured(bot, "digest 00:00")
    await escalated(bot)
    [debate] = bot.debates()

    # Past the 48 h SLA, at 06:00 UTC: the slots below stay within one local day.
    morning = (utcnow() + timedelta(days=3)).replace(hour=6, minute=0, second=0, microsecond=0)
    for slot in range(6):
        method = rng.choice(["chat.postMessage", "conversations.open", "*"])
        bot.emulator.fail(method, *([random_fault(rng)] * rng.randint(1, 3)))
        jobs = at(bot, morning + timedelta(minutes=12 * slot))
        await jobs.fire("review-sla", jobs.review_sla, 600)
        await jobs.fire("digest", jobs.digest, 300)
    bot.emulator.heal()
    final = at(bot, morning + timedelta(minutes=12 * 6))
    await final.fire("digest", final.digest, 300)
    await bot.finished()

    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    assert len([m for m in thread if "review of debate" in m["text"]]) == 1
    assert len([m for m in bot.emulator.dms(OWNER) if "expired" in m["text"]]) == 1
    digests = [m for m in bot.emulator.posted(CHANNEL) if "Debate digest" in m["text"]]
    assert len(digests) == 1
    assert escalation_state(bot) == "expired"


async def test_serve_runs_as_many_debates_at_once_as_its_concurrency(
    start_bot: BotFactory,
) -> None:
    # Debates with a call in flight, by the question each call carries: a debate may have two
    # calls out at once (its independent judge is asked beside its last moderation).
    in_flight: Counter[str] = Counter()
    peak = 0
    script = DebateScript()

    async def slow(request: LLMRequest) -> Any:
        nonlocal peak
        text = " ".join(m.content for m in request.messages)
        [question] = {n for n in range(6) if f"ADR-{n}?" in text}
        in_flight[str(question)] += 1
        peak = max(peak, len(+in_flight))
        await asyncio.sleep(0.3)
        in_flight[str(question)] -= 1
        return script(request)

    bot = await start_bot(llm=FunctionLLM(slow), worker_concurrency=4)
    for n in range(6):
        await bot.driver.command(f"Should we adopt ADR-{n}?", user=f"UUSER{n}")
    await bot.finished(6)
    assert peak == 4, "four debates at once, never more"


async def test_metrics_time_a_review_from_request_to_decision(start_bot: BotFactory) -> None:
    bot = await start_bot()
    request = await escalated(bot)
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    await bot.driver.submit(view, NOTE, user=REVIEWER)
    timed = "debatebot_review_turnaround_seconds_count 1.0"
    await bot.wait_for(lambda: timed in bot.runtime.metrics.exposition().decode(), "the timing")
    text = bot.runtime.metrics.exposition().decode()
    assert escalation_state(bot) == "approved"
    assert "debatebot_escalations_total 1.0" in text
    # The canned debate's judge does not reach its decision: LOW (0.05).
    assert 'debatebot_verdicts_total{level="LOW"} 1.0' in text
