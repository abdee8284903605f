"""`structured`: argument validation and re-asks, complete cross-examination, closings, and the
judge's weighted totals computed in code."""

from __future__ import annotations

import math
from typing import Any

import pytest

from engine.confidence import Component
from engine.errors import SpecError
from engine.llm import LLMRequest
from engine.models import DebateSpec, Decision, ModelSettings, Participant, Role
from engine.protocols import get_protocol
from engine.protocols.structured_judge import side_totals
from engine.providers.fake import FunctionLLM
from engine.rounds import Dimensions
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
SPEC = DebateSpec(
    question="Should billing move to event sourcing?",
    protocol="structured",
    default_model=FAKE,
)


def argument(prefix: str, n: int) -> dict[str, str]:
    return {
        "id": f"{prefix}-{n}",
        "claim": f"{prefix} claim number {n} about the ledger",
        "reasoning": f"Because the ledger needs a full audit history, reason {n} follows directly.",
        "evidence": f"ADR section {n}",
    }


def opening(prefix: str, count: int = 3) -> dict[str, Any]:
    return {"arguments": [argument(prefix, n) for n in range(1, count + 1)]}


def cross(targets: list[str]) -> dict[str, Any]:
    return {
        "responses": [
            {
                "target": t,
                "response": "refute",
                "explanation": f"{t} ignores replay cost.",
                "follow_up_question": "What is the replay time?",
            }
            for t in targets
        ]
    }


CLOSING = {"concessions": ["replay is slow"], "unrebutted": ["PRO-1"], "final_position": "Adopt."}
SCORES = {  # argument: (logic, evidence, responsiveness, honesty)
    "PRO-1": (8, 6, 7, 9),
    "PRO-2": (5, 5, 5, 5),
    "PRO-3": (9, 9, 9, 9),
    "CON-1": (4, 3, 6, 8),
    "CON-2": (7, 7, 7, 7),
    "CON-3": (2, 2, 2, 2),
}


def side_judgment(
    side: str, scores: dict[str, tuple[int, int, int, int]] = SCORES
) -> dict[str, Any]:
    own = {a: v for a, v in scores.items() if a.startswith(f"{side}-")}
    return {
        "scores": {
            a: dict(zip(("logic", "evidence", "responsiveness", "honesty"), v, strict=True))
            for a, v in own.items()
        },
        "trace": {a: {"status": "UPHELD", "note": "stands"} for a in own},
    }


RULING = {
    "decision": "accept_with_conditions",
    "confidence_level": "MODERATE",
    "fallacies": [
        {"argument": "CON-3", "fallacy": "slippery_slope", "explanation": "one bug, doom"}
    ],
    "unresolved_questions": ["How long does a full replay take?"],
    "recommendation": "Adopt event sourcing for the ledger only.",
}


class Script:
    def __init__(self, **queues: list[Any]) -> None:
        self.queues = queues
        self.calls: list[tuple[str, str]] = []

    def __call__(self, request: LLMRequest) -> Any:
        prompt = request.messages[1].content
        kind = request.schema_name or ""
        if kind == "IndependentJudgment":
            self.calls.append((kind, ""))
            return {"reasoning": "Adopt it for the ledger.", "decision": "accept_with_conditions"}
        side = "PRO" if "the PRO side" in prompt or "judge the PRO arguments" in prompt else "CON"
        self.calls.append((kind, side))
        queue = self.queues.get(f"{kind}:{side}") or self.queues.get(kind)
        if queue:
            return queue.pop(0)
        if kind == "Opening":
            return opening(side)
        if kind == "CrossExamination":
            return cross([f"{'CON' if side == 'PRO' else 'PRO'}-{n}" for n in (1, 2, 3)])
        if kind == "Closing":
            return CLOSING
        if kind == "SideJudgment":
            return side_judgment(side)
        return RULING


async def run(script: Script, spec: DebateSpec = SPEC) -> Any:
    llm = FunctionLLM(script)
    return await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts()), llm


async def test_a_full_structured_debate_in_order() -> None:
    script = Script()
    result, _ = await run(script)
    assert script.calls == [
        ("Opening", "PRO"),
        ("Opening", "CON"),
        ("CrossExamination", "PRO"),
        ("CrossExamination", "CON"),
        ("Closing", "PRO"),
        ("Closing", "CON"),
        ("SideJudgment", "PRO"),
        ("SideJudgment", "CON"),
        ("Ruling", "CON"),
        ("IndependentJudgment", ""),
    ]
    assert [t.speaker for t in result.transcript[:2]] == ["pro", "con"]
    judge = [(t.role, t.round, t.phase) for t in result.transcript[-4:-1]]
    assert judge == [(Role.JUDGE, 4, "PRO"), (Role.JUDGE, 4, "CON"), (Role.JUDGE, 4, "ruling")]
    assert result.verdict.decision is Decision.ACCEPT_WITH_CONDITIONS
    assert result.verdict.unresolved_points == ["How long does a full replay take?"]
    # The trace upholds every CON argument against accepting: all three stand unanswered.
    # -3.2 + 3.0 (the judge agrees) + 1.1 (nothing quoted) - 1.2 + 0.2 (MODERATE) = -0.1
    assert result.verdict.components is not None
    assert result.verdict.components.notes[Component.UNANSWERED] == "3 of 3 objections unanswered"
    assert result.verdict.confidence == pytest.approx(1 / (1 + math.exp(0.1)), abs=1e-4)
    assert result.report["trace"][0] == {"argument": "PRO-1", "status": "UPHELD", "note": "stands"}


async def test_weighted_totals_are_computed_from_the_dimension_scores() -> None:
    result, _ = await run(Script())
    weighted = result.report["weighted_scores"]
    assert weighted["PRO-1"] == pytest.approx(8 * 0.30 + 6 * 0.30 + 7 * 0.25 + 9 * 0.15)
    assert weighted["CON-1"] == pytest.approx(4 * 0.30 + 3 * 0.30 + 6 * 0.25 + 8 * 0.15)
    pro = (weighted["PRO-1"] + weighted["PRO-2"] + weighted["PRO-3"]) / 3
    con = (weighted["CON-1"] + weighted["CON-2"] + weighted["CON-3"]) / 3
    assert result.report["side_totals"] == {"PRO": pytest.approx(pro), "CON": pytest.approx(con)}
    assert result.report["leading_side"] == "PRO"
    perfect = Dimensions(logic=10, evidence=10, responsiveness=10, honesty=10)
    assert side_totals({"PRO-1": perfect}) == {"PRO": pytest.approx(10.0), "CON": 0.0}


async def test_bad_openings_are_reasked_with_the_problem() -> None:
    wrong_prefix = opening("CON")
    too_short = opening("PRO") | {"arguments": [argument("PRO", 1) | {"claim": "short"}]}
    no_evidence = opening("PRO")
    no_evidence["arguments"][2]["evidence"] = ""
    script = Script(**{"Opening:PRO": [wrong_prefix, too_short, opening("PRO")]})
    result, llm = await run(script)
    assert result.transcript[0].reasks == 2
    reasks = [c.messages[-1].content for c in llm.calls[:3]]
    assert "String should match pattern '^PRO-[1-5]$'" in reasks[1]
    script = Script(**{"Opening:PRO": [no_evidence, opening("PRO")]})
    result, llm = await run(script)
    assert result.transcript[0].reasks == 1
    assert "evidence" in llm.calls[1].messages[-1].content


async def test_a_skipped_or_added_argument_in_cross_examination_is_reasked() -> None:
    skipped = cross(["CON-1", "CON-2"])
    added = cross(["CON-1", "CON-2", "CON-3", "PRO-4"])
    script = Script(
        **{"CrossExamination:PRO": [skipped, added, cross(["CON-1", "CON-2", "CON-3"])]}
    )
    result, llm = await run(script)
    pro_cross = next(t for t in result.transcript if t.round == 2 and t.speaker == "pro")
    assert pro_cross.reasks == 2
    reask_prompts = [
        c.messages[-1].content
        for c in llm.calls
        if "Your reply was invalid" in c.messages[-1].content
    ]
    assert "at least 3 items" in reask_prompts[0], "the skip is named"
    assert "at most 3 items" in reask_prompts[1], "the added answer is named"


async def test_a_closing_over_200_words_is_reasked() -> None:
    long_closing = CLOSING | {"final_position": " ".join(["adopt"] * 201)}
    result, _ = await run(Script(**{"Closing:PRO": [long_closing, CLOSING]}))
    pro_closing = next(t for t in result.transcript if t.round == 3 and t.speaker == "pro")
    assert pro_closing.reasks == 1


async def test_a_side_judgment_missing_or_adding_an_argument_is_reasked() -> None:
    partial = side_judgment("CON", {k: v for k, v in SCORES.items() if k != "CON-2"})
    other_side = side_judgment("CON") | {"scores": side_judgment("PRO")["scores"]}
    script = Script(**{"SideJudgment:CON": [partial, other_side, side_judgment("CON")]})
    result, llm = await run(script)
    con = next(t for t in result.transcript if t.role is Role.JUDGE and t.phase == "CON")
    assert con.reasks == 2
    reasks = [c.messages[-1].content for c in llm.calls if c.schema_name == "SideJudgment"]
    assert "scores.CON-2: Field required" in reasks[2]
    assert "scores.PRO-1: Extra inputs are not permitted" in reasks[3]
    assert set(result.report["weighted_scores"]) == set(SCORES), "every argument scored once"
    assert [row["argument"] for row in result.report["trace"]] == list(SCORES)


async def test_the_ruling_sees_the_scores_computed_in_code() -> None:
    _, llm = await run(Script())
    ruling = next(c for c in llm.calls if c.schema_name == "Ruling").messages[1].content
    weighted = 8 * 0.30 + 6 * 0.30 + 7 * 0.25 + 9 * 0.15
    shown = f"PRO-1: logic 8, evidence 6, responsiveness 7, honesty 9; weighted {weighted:.2f}"
    assert shown in ruling
    assert f"PRO total (mean weighted score): {(weighted + 5 + 9) / 3:.2f}" in ruling


async def test_a_fallacy_naming_an_unknown_argument_is_reasked() -> None:
    unknown = RULING | {
        "fallacies": [{"argument": "CON-9", "fallacy": "straw_man", "explanation": "no such"}]
    }
    result, _ = await run(Script(Ruling=[unknown, RULING]))
    assert next(t for t in result.transcript if t.phase == "ruling").reasks == 1
    assert result.report["fallacies"][0]["argument"] == "CON-3"


async def test_a_resumed_debate_replays_each_judge_call_under_its_own_key() -> None:
    first, _ = await run(Script())
    llm = FunctionLLM(Script())
    resumed = await run_debate(
        SPEC, resolve_llm=lambda _: llm, prompts=shipped_prompts(), recorded=first.transcript
    )
    assert llm.calls == []
    assert resumed.report == first.report
    assert resumed.verdict == first.verdict


def test_structured_takes_two_sides() -> None:
    three = SPEC.model_copy(
        update={"participants": [Participant(role=Role.DEBATER, name=n, model=FAKE) for n in "abc"]}
    )
    with pytest.raises(SpecError, match="two sides"):
        get_protocol("structured").validate(three)


async def test_a_repeated_target_is_reasked() -> None:
    repeated = cross(["CON-1", "CON-1", "CON-3"])
    complete = cross(["CON-1", "CON-2", "CON-3"])
    _, llm = await run(Script(**{"CrossExamination:PRO": [repeated, complete]}))
    last_messages = [c.messages[-1].content for c in llm.calls]
    reask = next(m for m in last_messages if "Your reply was invalid" in m)
    assert "skipped CON-2" in reask
    assert "repeated CON-1" in reask


async def test_arguments_out_of_order_are_reasked() -> None:
    shuffled = opening("PRO")
    shuffled["arguments"][0]["id"], shuffled["arguments"][1]["id"] = "PRO-2", "PRO-1"
    result, llm = await run(Script(**{"Opening:PRO": [shuffled, opening("PRO")]}))
    assert result.transcript[0].reasks == 1
    assert "argument ids must be ['PRO-1', 'PRO-2', 'PRO-3']" in llm.calls[1].messages[-1].content
