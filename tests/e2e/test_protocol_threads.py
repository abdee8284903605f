"""Every protocol speaks in the thread: one message per round (or phase), in order, each once,
even across a worker that dies; the verdict carries the protocol's own outcome; where Slack
cannot stream the live plan (`test_live_plan.py`), the parent shows who is speaking while the
debate runs. The models are the schema-filling fake."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta
from typing import Any

import pytest

from bot.settings import Settings
from bot.store import endings, turns
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.wiring import build_services, build_worker
from engine.models import DebateResult, utcnow
from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM
from tests.e2e.conftest import CHANNEL, Bot, BotFactory
from tests.e2e.driver import WORKSPACE

COMMANDS = {
    "adversarial": "--protocol adversarial --rounds 2",
    "stances": '--protocol stances --for "adopt it now" --against "wait a quarter"',
    "consensus": "--protocol consensus",
    "structured": "--protocol structured",
    "panel": "--protocol panel",
}
SPEAKING = {
    "adversarial": ("proposer is making the case", "critic is challenging the proposal"),
    "stances": ("is arguing",),
    "consensus": ("speaking in the proposal phase", "speaking in the critique phase"),
    "structured": ("is making the opening", "is cross-examining", "judge is scoring"),
    "panel": ("is answering on its own", "is revising after the peers' critique"),
}
STEP = re.compile(r"(?:round|phase) (\d+) of")
OUTCOME = {
    "adversarial": "How the confidence was reached",
    "stances": "Judgment:",
    "consensus": "decision rule:",
    "structured": "Structured outcome:",
    "panel": "Panel:",
}


def fake(delay_s: float = 0.02) -> SchemaFillingLLM:
    return SchemaFillingLLM(seed=7, script=CANNED_DEBATE_REPLIES, delay_s=delay_s)


def result_of(bot: Bot, debate_id: int = 1) -> DebateResult:
    """The stored outcome, with its turns (stored apart from the verdict)."""
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        record = endings.verdict_for(session, debate_id=debate_id)
        assert record is not None
        result = DebateResult.model_validate_json(record.result_json)
        stored = turns.stored_turns(session, debate_id=debate_id)
    return result.model_copy(update={"transcript": stored})


def expected_titles(result: DebateResult) -> list[str]:
    """The round messages the stored outcome says the thread must hold, in order."""
    spec, report = result.spec, result.report or {}
    top = spec.max_rounds
    if spec.protocol == "adversarial":
        return [f"Round {r.round} of {top}" for r in result.rounds]
    if spec.protocol == "stances":
        return [f"Round {n} of {top}" for n in range(1, top + 1)]
    if spec.protocol == "structured":
        return [
            "Openings \u00b7 phase 1 of 4",
            "Cross-examination \u00b7 phase 2 of 4",
            "Closings \u00b7 phase 3 of 4",
            "The judge's scores \u00b7 phase 4 of 4",
        ]
    if spec.protocol == "consensus":
        # Round 1 opens with a proposal; every later critique opens a new round.
        titles, number = [], 1
        for index, phase in enumerate(report["phase_sequence"]):
            number += phase == "critique" and index > 1
            titles.append(f"Round {number} of {top} \u00b7 {phase} phase")
        return titles
    return [f"Round {h['round']} of {top}" for h in report["rounds"]]


def text_of(message: dict[str, Any]) -> str:
    return json.dumps(message.get("blocks") or [], ensure_ascii=False)


def thread(bot: Bot) -> list[dict[str, Any]]:
    [debate] = bot.debates()
    assert debate.thread_ts is not None
    return bot.emulator.in_thread(CHANNEL, debate.thread_ts)


def live_details(bot: Bot) -> list[str]:
    """The parent's status lines, in the order Slack received the updates."""
    [debate] = bot.debates()
    lines = []
    for call in bot.emulator.calls_of("chat.update"):
        if call.params.get("ts") != debate.thread_ts:
            continue
        blocks = call.params.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        for block in blocks:
            text = (block.get("text") or {}).get("text", "")
            if (
                text.startswith(":") and ("*Debating*" in text or "*Moderating*" in text)
            ) or "*Done*" in text:
                lines.append(text)
    return lines


@pytest.mark.parametrize("protocol", list(COMMANDS))
async def test_each_round_is_posted_once_in_order_with_the_protocols_outcome(
    start_bot: BotFactory, protocol: str
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    bot.emulator.streaming = False  # an older workspace: the parent's status is the progress
    await bot.driver.command(f"Should we move billing retries to a queue? {COMMANDS[protocol]}")
    await bot.finished()
    result = result_of(bot)
    assert result.verdict.status.value == "COMPLETE", result.error
    messages = thread(bot)
    titles = [m["text"] for m in messages]
    rounds = [t for t in titles if not t.startswith(("Verdict", "Review", ":"))]
    assert rounds == expected_titles(result)
    verdict_at = next(i for i, t in enumerate(titles) if t.startswith("Verdict"))
    assert verdict_at > titles.index(rounds[-1]), "the verdict comes after every round"
    assert OUTCOME[protocol] in text_of(messages[verdict_at])
    # What the models said is in the thread, not only in the export.
    said = said_by_models(result)
    posted = " ".join(text_of(m) for m in messages)
    assert all(piece in posted for piece in said)
    details = live_details(bot)
    assert details, "the parent showed the debate's progress"
    assert "*Done*" in details[-1]
    assert any(phrase in line for line in details for phrase in SPEAKING[protocol]), details
    steps = [int(m.group(1)) for m in map(STEP.search, details) if m]
    assert steps == sorted(steps), f"the status never goes back: {details}"


def said_by_models(result: DebateResult) -> list[str]:
    """A few strings each protocol's thread must show, taken from the stored turns."""
    protocol = result.spec.protocol
    picks: list[str] = []
    for turn in result.transcript:
        parsed = turn.parsed
        if protocol == "stances" and "argument" in parsed:
            picks.append(parsed["argument"])
        elif protocol == "consensus" and turn.role.value == "debater":
            picks.append(parsed["rationale"])
        elif protocol == "structured" and "arguments" in parsed:
            picks.append(parsed["arguments"][0]["claim"])
        elif protocol == "panel" and turn.role.value == "debater" and turn.round == 1:
            picks.append(parsed["answer"])
        elif protocol == "adversarial" and turn.role.value == "critic":
            picks.append(parsed["thesis"])
    assert picks
    return picks


@pytest.mark.parametrize("protocol", ["stances", "consensus", "structured", "panel"])
async def test_a_worker_that_dies_mid_debate_posts_no_round_twice(
    start_bot: BotFactory, protocol: str
) -> None:
    # Consensus can end at its third turn: its turns are slower, so the kill comes before it.
    delay_s = 1.0 if protocol == "consensus" else 0.3
    bot = await start_bot(llm=fake(delay_s=delay_s), worker_concurrency=0)
    await bot.driver.command(f"Should we move billing retries to a queue? {COMMANDS[protocol]}")
    await bot.wait_for(bot.debates, "the queued debate")
    services = build_services(Settings(provider="fake"), resolve_llm=lambda _model: bot.llm)
    first = build_worker(services, bot.engine, worker_id="first", reporter=bot.runtime.notifier)
    running = asyncio.create_task(first.run_once())

    def turns_stored() -> int:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            return len(turns.turn_rows(session, debate_id=1))

    # Two turns in: stances and structured have finished their first round, the others are
    # inside one; the next turn takes delay_s, so the worker dies mid-debate.
    await bot.wait_for(lambda: turns_stored() >= 2, "two stored turns")
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        row = session.get(Debate, 1)
        assert row is not None
        assert row.state != "finished"
        row.lease_expires_at = utcnow() - timedelta(seconds=1)
        session.add(row)
        session.commit()
    second = build_worker(services, bot.engine, worker_id="second", reporter=bot.runtime.notifier)
    assert await second.run_once()
    await bot.finished()
    titles = [m["text"] for m in thread(bot)]
    rounds = [t for t in titles if not t.startswith(("Verdict", "Review", ":"))]
    assert rounds == expected_titles(result_of(bot))
    assert len([t for t in titles if t.startswith("Verdict")]) == 1
