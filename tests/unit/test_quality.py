"""Degenerate model output cannot pass for a verdict: each check on outputs recorded from the
local model (or shaped like them), and its findings scored and escalated through the runner."""

from __future__ import annotations

import math
from typing import Any

import pytest

from engine import quality
from engine.confidence import Component
from engine.llm import LLMRequest, parse_json_lenient
from engine.models import (
    ConfidenceLevel,
    DebateFlag,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    ModelSettings,
    Participant,
    Role,
    Verdict,
    utcnow,
)
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import DebateScript, judge_says, reply_for, shipped_prompts

# Recorded from SmolLM2-135M under a JSON grammar.
RECORDED_LOOP = (
    "The decision is a decision that is not a decision that is not a decision that is not a"
    " decision that is not a decision that is not a decision"
)
MODERATOR_FIELD_TEXT = "the decision, its reasons and any conditions, in a short paragraph."
FAKE = ModelSettings(provider="fake", model="fake-model")


def test_a_turn_that_repeats_itself_is_caught_and_ordinary_prose_is_not() -> None:
    assert quality.repeats_itself(RECORDED_LOOP)
    assert not quality.repeats_itself(
        "Cache-aside cuts p99 latency, but the 60 minute TTL lets a price change go unseen for"
        " an hour, and the 503 on a Redis outage turns a cache failure into a checkout outage."
    )


def test_a_bare_number_is_no_synthesis() -> None:
    for bare in ("1.0", " 0.85 ", "true", "N/A", "--", '"42"'):
        assert quality.bare_value(bare), bare
    assert not quality.bare_value("Reject: the TTL is unsafe.")


def test_control_characters_inside_json_strings_are_accepted() -> None:
    raw = '{"synthesis": "line one\nline two\tand a tab"}'
    assert parse_json_lenient(raw) == {"synthesis": "line one\nline two\tand a tab"}


async def test_a_bare_number_as_the_moderators_synthesis_lowers_confidence_and_escalates() -> None:
    sure = reply_for(
        "moderator",
        synthesis="1.0",
        confidence_level="HIGH",
        unresolved_points=[],
        decision="accept",
    )
    llm = DebateScript(moderator=[sure], independent_judge=[judge_says("accept")]).llm()

    result = await run_debate(
        DebateSpec(question="Adopt ADR-042?", default_model=FAKE),
        resolve_llm=lambda _m: llm,
        prompts=shipped_prompts(),
    )

    verdict = result.verdict
    assert verdict.components is not None
    assert verdict.components.value(Component.OUTPUT_CHECKS) == pytest.approx(1 / 3)
    assert verdict.components.notes[Component.OUTPUT_CHECKS] == "1 output check failed"
    # -3.2 + 3.0 (the judge agrees) + 1.1 (nothing cited) - 7.2 / 3 + 0.4 (HIGH) = -1.1
    assert verdict.confidence == pytest.approx(1 / (1 + math.exp(1.1)), abs=1e-4)
    assert verdict.level is ConfidenceLevel.LOW
    assert verdict.escalate
    degenerate = [r for r in verdict.escalation_reasons if "looks degenerate" in r]
    assert len(degenerate) == 1
    assert "bare value" in degenerate[0]
    assert "'1.0'" in degenerate[0]
    assert DebateFlag.DEGENERATE_OUTPUT in result.flags


async def test_a_repeating_critic_and_an_echoing_moderator_are_both_penalised() -> None:
    critic = reply_for("critic", thesis=RECORDED_LOOP)
    moderator = reply_for("moderator", synthesis=MODERATOR_FIELD_TEXT)
    llm = DebateScript(critic=[critic], moderator=[moderator]).llm()

    result = await run_debate(
        DebateSpec(question="Adopt ADR-042?", default_model=FAKE),
        resolve_llm=lambda _m: llm,
        prompts=shipped_prompts(),
    )

    [reason] = [r for r in result.verdict.escalation_reasons if "looks degenerate" in r]
    assert "output repeats itself (critic)" in reason
    assert "copies the prompt's field descriptions (moderator synthesis)" in reason
    assert result.verdict.components is not None
    assert result.verdict.components.value(Component.OUTPUT_CHECKS) == pytest.approx(2 / 3)


def stances_spec() -> DebateSpec:
    return DebateSpec(
        question="Which database should the orders service use?",
        protocol="stances",
        max_rounds=1,
        default_model=FAKE,
        participants=[
            Participant(role=Role.DEBATER, name=name, stance=stance, model=FAKE)
            for name, stance in (("a", "keep PostgreSQL"), ("b", "move to DynamoDB"))
        ],
    )


async def test_the_stances_judge_is_checked_too() -> None:
    def script(request: LLMRequest) -> dict[str, Any]:
        if request.schema_name == "StanceArgument":
            return {"argument": "Transactions matter for orders.", "key_points": ["ACID"]}
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "Transactions matter.", "decision": "synthesis"}
        return {
            "scores": [
                {"stance": "Debater A", "score": 6},
                {"stance": "Debater B", "score": 6},
            ],
            "verdict": "0",
            "winner": None,
            "reasoning": RECORDED_LOOP,
            "confidence_level": "HIGH",
        }

    llm = FunctionLLM(script)
    result = await run_debate(stances_spec(), resolve_llm=lambda _m: llm, prompts=shipped_prompts())

    [reason] = [r for r in result.verdict.escalation_reasons if "looks degenerate" in r]
    assert "output repeats itself (judge)" in reason
    assert "bare value" in reason
    assert result.verdict.escalate


def structured_result(decision: Decision, pro: float, con: float) -> DebateResult:
    verdict = Verdict(
        status=DebateStatus.COMPLETE,
        decision=decision,
        synthesis="The judge weighed the arguments (weighted side totals shown).",
        confidence=0.70,
        level=ConfidenceLevel.MODERATE,
        escalate=False,
    )
    return DebateResult(
        spec=DebateSpec(question="Adopt it?", protocol="structured", default_model=FAKE),
        verdict=verdict,
        report={"side_totals": {"PRO": pro, "CON": con}},
        started_at=utcnow(),
        finished_at=utcnow(),
    )


def test_a_structured_decision_against_tied_totals_is_a_finding() -> None:
    prompts = shipped_prompts()
    tied = quality.output_checks(structured_result(Decision.REJECT, 2.0, 2.0), prompts)

    assert tied == [
        "the decision `reject` contradicts the weighted side totals (PRO 2.00, CON 2.00)"
    ]
    assert quality.output_checks(structured_result(Decision.REJECT, 1.0, 3.0), prompts) == []
    against = quality.output_checks(structured_result(Decision.ACCEPT, 1.0, 3.0), prompts)
    assert len(against) == 1


async def test_the_escalation_reason_states_the_confidence_after_every_penalty() -> None:
    """Before, the threshold reason was written before the output checks, so the CLI printed
    `CONFIDENCE 0.00` beside `confidence 0.39 is below the escalation threshold`."""
    low = reply_for("moderator", synthesis="1", confidence_level="LOW", decision="accept")
    llm = DebateScript(moderator=[low]).llm()

    result = await run_debate(
        DebateSpec(question="Adopt ADR-042?", default_model=FAKE),
        resolve_llm=lambda _m: llm,
        prompts=shipped_prompts(),
    )

    verdict = result.verdict
    stated = [r for r in verdict.escalation_reasons if "below the escalation threshold" in r]
    assert stated == [f"confidence {verdict.confidence:.2f} is below the escalation threshold 0.60"]
    assert verdict.confidence < 0.35
