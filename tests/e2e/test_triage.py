"""Triage before debate: with `triage on`, an ADR post (or a review reaction) first gets one
cheap call; a low-downside one is answered on the spot with a *Debate anyway* button, a
high-downside one is debated, and the button starts exactly one debate however often it is
clicked."""

from __future__ import annotations

import re
from typing import Any

from bot.messages import action_ids
from bot.store import channels
from bot.store.db import session_scope
from engine.errors import LLMError
from engine.llm import LLMRequest
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM
from tests.e2e.conftest import ADMIN, CHANNEL, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.test_triggers import ADR_TEXT, message_event
from tests.helpers import DebateScript


def estimate(downside: float, confidence: float = 0.9) -> dict[str, Any]:
    return {
        "task_type": "architecture",
        "answer": "Adopt the cache with a shorter TTL and a fallback to Postgres.",
        "decision": "accept_with_conditions",
        "confidence": confidence,
        "downside": downside,
        "rationale": "A cache in front of pricing is easy to remove again.",
    }


def triaging(downside: float) -> FunctionLLM:
    """The debate script, with one triage estimate for the triage call."""
    script = DebateScript()

    def reply(request: LLMRequest) -> Any:
        if request.schema_name == "TriageEstimate":
            return estimate(downside)
        return script(request)

    # Priced, so the answer's cost is not zero and a message that loses it shows.
    return FunctionLLM(reply, pricing=Pricing(input_per_mtok=3.0, output_per_mtok=15.0))


async def watching_with_triage(start_bot: BotFactory, downside: float) -> tuple[Bot, str]:
    bot = await start_bot(llm=triaging(downside))
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by=ADMIN,
            values={"adr_watch": True, "triage": True},
        )
    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    await bot.driver.event(message_event(ts, ADR_TEXT))
    return bot, ts


def schemas(bot: Bot) -> list[str | None]:
    return [call.schema_name for call in bot.llm.calls]


async def test_a_low_downside_adr_gets_the_single_answer_and_debate_anyway(
    start_bot: BotFactory,
) -> None:
    bot, ts = await watching_with_triage(start_bot, downside=0.1)
    [debate] = await bot.finished()
    assert debate.triage == "answered"
    assert "downside too small" in (debate.triage_reason or "") or "confident" in (
        debate.triage_reason or ""
    )
    assert schemas(bot) == ["TriageEstimate"], "one cheap call, no debate"
    [answer] = [m for m in bot.emulator.in_thread(CHANNEL, ts) if m["text"].startswith("Answered")]
    assert "Adopt the cache with a shorter TTL" in str(answer["blocks"])
    assert "Why no debate" in str(answer["blocks"])

    for _ in range(3):
        reply = await bot.driver.click(answer, action_ids.ACTION_DEBATE_ANYWAY, user="UBOB")
        assert reply.status == 200
    second = (await bot.finished(2))[1]
    assert (second.source, second.parent_debate_id, second.thread_ts) == ("debate_anyway", 1, ts)
    assert second.triage is None
    assert len(bot.debates()) == 2, "three clicks, one debate"
    already = [e for e in bot.emulator.ephemeral if "already started" in e["text"]]
    assert already, "the later clicks are told where the debate is"
    updated = next(m for m in bot.emulator.in_thread(CHANNEL, ts) if m["ts"] == answer["ts"])
    assert "asked for the debate anyway" in str(updated["blocks"])
    # The updated answer is made from the stored result: it shows what the answer cost.
    [cost] = re.findall(r"cost \$([0-9.]+) · one call", str(answer["blocks"]))
    assert float(cost) > 0
    assert f"cost ${cost} · one call" in str(updated["blocks"])
    assert not any(b["type"] == "actions" for b in updated["blocks"])
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, ts)]
    assert any(t.startswith("Verdict") for t in thread)


async def test_a_high_downside_adr_is_debated_with_the_reason_recorded(
    start_bot: BotFactory,
) -> None:
    bot, ts = await watching_with_triage(start_bot, downside=0.9)
    [debate] = await bot.finished()
    assert debate.triage == "debate"
    assert "downside 0.90" in (debate.triage_reason or "")
    assert schemas(bot)[0] == "TriageEstimate"
    assert "ModeratorTurn" in schemas(bot)
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, ts)]
    assert not any(t.startswith("Answered") for t in thread)
    assert any(t.startswith("Verdict") for t in thread)


async def test_triage_off_debates_without_asking(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=triaging(0.1))
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"adr_watch": True}
        )
    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    await bot.driver.event(message_event(ts, ADR_TEXT))
    [debate] = await bot.finished()
    assert debate.triage is None
    assert "TriageEstimate" not in schemas(bot)


async def test_a_triage_model_that_fails_means_a_debate(start_bot: BotFactory) -> None:
    """When in doubt, debate: a triage call that errors (the model is down) runs the debate."""
    script = DebateScript()

    def reply(request: LLMRequest) -> Any:
        if request.schema_name == "TriageEstimate":
            return LLMError("the model server answered 503")
        return script(request)

    bot = await start_bot(llm=FunctionLLM(reply))
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by=ADMIN,
            values={"adr_watch": True, "triage": True},
        )
    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    await bot.driver.event(message_event(ts, ADR_TEXT))
    [debate] = await bot.finished()
    assert debate.outcome == "COMPLETE"
    assert debate.triage == "pending", "no triage decision was recorded"
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, ts)]
    assert any(t.startswith("Verdict") for t in thread)
