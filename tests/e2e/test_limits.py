"""Requests are bounded: rounds per protocol, debates in flight per person and per channel, and
a default budget. Every refusal is ephemeral, names the limit and the setting that raises it, and
queues nothing."""

from __future__ import annotations

from bot.settings import Settings
from tests.e2e.conftest import CHANNEL, Bot, BotFactory


async def answers(bot: Bot, count: int) -> list[str]:
    await bot.wait_for(lambda: len(bot.emulator.responses) >= count, f"{count} answers")
    return [r["text"] for r in bot.emulator.responses]


async def test_an_absurd_round_count_is_refused_for_every_protocol(start_bot: BotFactory) -> None:
    bot = await start_bot()

    huge = await bot.driver.command(
        "Keep Postgres? --protocol stances --for A --against B --rounds 100000000000000000000"
    )
    seven = await bot.driver.command(
        "Keep Postgres? --protocol stances --for A --against B --rounds 7"
    )
    await bot.driver.command("Keep Postgres? --protocol panel --rounds 6")

    for reply in (huge, seven):
        assert reply.json()["response_type"] == "ephemeral"
        assert "--rounds is too many" in reply.json()["text"]
        assert "stances 6" in reply.json()["text"]
    [said] = await answers(bot, 1)
    assert "the panel protocol runs at most 5 rounds; 6 were asked for" in said
    assert bot.debates() == []
    assert bot.llm.calls == []


async def test_one_person_cannot_hold_every_worker(start_bot: BotFactory) -> None:
    bot = await start_bot(worker_concurrency=0, max_debates_per_user=2)

    for n in range(3):
        await bot.driver.command(f"Question {n}?", user="UGREEDY")
    await bot.driver.command("Someone else's question?", user="UOTHER")

    [refusal] = await answers(bot, 1)
    assert "you already have 2 debates queued or running" in refusal
    assert "DEBATEBOT_MAX_DEBATES_PER_USER=2" in refusal
    assert bot.emulator.responses[0]["response_type"] == "ephemeral"
    await bot.wait_for(lambda: len(bot.debates()) == 3, "the three debates within the limits")
    requesters = sorted(d.requested_by for d in bot.debates() if d.requested_by is not None)
    assert requesters == ["UGREEDY", "UGREEDY", "UOTHER"]


async def test_one_channel_cannot_hold_every_worker(start_bot: BotFactory) -> None:
    bot = await start_bot(worker_concurrency=0, max_debates_per_channel=2)

    for n in range(3):
        await bot.driver.command(f"Question {n}?", user=f"UUSER{n}")

    [refusal] = await answers(bot, 1)
    assert "this channel already has 2 debates queued or running" in refusal
    assert "DEBATEBOT_MAX_DEBATES_PER_CHANNEL=2" in refusal
    assert len(bot.debates()) == 2
    await bot.driver.command("Elsewhere?", user="UUSER2", channel="COTHER")
    await bot.wait_for(lambda: len(bot.debates()) == 3, "a debate in another channel")
    assert bot.emulator.posted(CHANNEL), "the debates within the limit were announced"


def test_debates_have_a_budget_unless_they_name_their_own() -> None:
    assert Settings().budget_usd == 1.0
