"""*Another round* is admitted like every other request (issue 43): at the monthly cap or at the
limit of debates in flight, the reviewer who presses it is told why, privately, and nothing is
queued or decided."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import select

from bot.messages import action_ids
from bot.store import queue
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateSource, DebateState
from bot.store.review_tables import Escalation
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import DebateSpec, utcnow
from tests.e2e.conftest import CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.test_reviews import configured, escalated, reviews_of


async def press_another_round(bot: Bot, request: dict[str, object]) -> str:
    before = len(bot.emulator.ephemeral)
    await bot.driver.click(request, action_ids.ACTION_ANOTHER_ROUND, user=REVIEWER)
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > before, "the refusal")
    refusal = bot.emulator.ephemeral[-1]
    assert refusal["user"] == REVIEWER
    return str(refusal["text"])


def open_escalations(bot: Bot) -> list[Escalation]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return [e for e in session.exec(select(Escalation)) if e.state == "open"]


async def test_another_round_at_the_monthly_cap_is_refused_with_the_reason(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    request = await escalated(bot)
    # The channel's cap is set below what one more round could cost (the default $1 budget).
    await configured(bot, "monthly_budget 0.5")

    said = await press_another_round(bot, request)

    assert "another round is not possible" in said
    assert "monthly budget" in said
    assert "could cost up to $1.00, so nothing was queued" in said
    assert len(bot.debates()) == 1
    assert reviews_of(bot) == []
    assert len(open_escalations(bot)) == 1


async def test_another_round_at_the_in_flight_limit_is_refused_with_the_reason(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(max_debates_per_channel=1)
    request = await escalated(bot)
    # Another debate of the channel is running, on a worker elsewhere that holds its lease.
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        running, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key="elsewhere:1",
                spec=DebateSpec(question="Something else?"),
                source=DebateSource.COMMAND,
                channel_id=CHANNEL,
            ),
        )
        row = session.get(Debate, running.id)
        assert row is not None
        row.state = DebateState.RUNNING
        row.lease_owner = "another-host/worker"
        row.lease_expires_at = utcnow() + timedelta(hours=1)
        session.add(row)
        session.commit()

    said = await press_another_round(bot, request)

    assert "another round is not possible" in said
    assert "this channel already has 1 debates queued or running" in said
    assert "DEBATEBOT_MAX_DEBATES_PER_CHANNEL=1" in said
    assert len(bot.debates()) == 2
    assert reviews_of(bot) == []
    assert len(open_escalations(bot)) == 1
