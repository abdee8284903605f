"""`stances`: speaking order, what each debater saw, the judge's anonymized and shuffled view,
winner mapping, the synthesizer and spec validation."""

from __future__ import annotations

import logging
import math
import random
import re
from typing import Any

import pytest

from engine.confidence import Component
from engine.errors import SpecError
from engine.events import discard_events
from engine.ledger import TurnLedger
from engine.llm import LLMRequest
from engine.models import DebateSpec, Decision, ModelSettings, Participant, Role
from engine.protocols import get_protocol
from engine.protocols.stances import StancesProtocol
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
DEBATERS = {"alice": "keep PostgreSQL", "bob": "move to DynamoDB", "carol": "use both"}
STANCE = re.compile(r"YOUR STANCE: (.+)")


def spec(debaters: dict[str, str] = DEBATERS, rounds: int = 2, **options: Any) -> DebateSpec:
    return DebateSpec(
        question="Which database should the orders service use?",
        protocol="stances",
        max_rounds=rounds,
        default_model=FAKE,
        participants=[
            Participant(role=Role.DEBATER, name=n, stance=s, model=FAKE)
            for n, s in debaters.items()
        ],
        options=options,
    )


class Script:
    """Debaters answer with a numbered argument; the judge scores the stances (`scores`, in
    label order) and names `winner`; the independent judge decides `independent`."""

    def __init__(
        self,
        winner: str | None = "Debater B",
        scores: tuple[int, ...] = (5, 8, 4),
        independent: str = "Position B",
    ) -> None:
        self.winner = winner
        self.scores = scores
        self.independent = independent
        self.count = 0

    def __call__(self, request: LLMRequest) -> dict[str, Any]:
        if request.schema_name == "StanceArgument":
            self.count += 1
            stance = STANCE.search(request.messages[-1].content)
            assert stance is not None
            return {"argument": f"argument {self.count}", "key_points": [f"point {self.count}"]}
        if request.schema_name == "StancesJudgment":
            labels = re.findall(r"^- (.+?): ", request.messages[-1].content, re.MULTILINE)
            return {
                "scores": [
                    {"stance": label, "score": score}
                    for label, score in zip(labels, self.scores, strict=False)
                ],
                "verdict": "Keep the relational store for orders.",
                "winner": self.winner,
                "reasoning": "The consistency argument was never answered.",
                "confidence_level": "HIGH",
            }
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "The consistency argument stands.", "decision": self.independent}
        return {"decision": "keep", "summary": "stay on PostgreSQL", "risks": ["cost"]}


async def run(s: DebateSpec, script: Script | None = None) -> tuple[Any, FunctionLLM]:
    llm = FunctionLLM(script or Script())
    result = await run_debate(s, resolve_llm=lambda _: llm, prompts=shipped_prompts())
    return result, llm


async def test_every_debater_speaks_in_order_and_sees_all_earlier_arguments_without_names() -> None:
    result, llm = await run(spec())
    debater_calls = [c for c in llm.calls if c.schema_name == "StanceArgument"]
    stances = [STANCE.search(c.messages[-1].content).group(1) for c in debater_calls]  # type: ignore[union-attr]
    assert stances == list(DEBATERS.values()) * 2
    assert [t.speaker for t in result.transcript if t.role is Role.DEBATER] == list(DEBATERS) * 2
    for index, call in enumerate(debater_calls):
        prompt = call.messages[-1].content
        seen = re.findall(r"^R\d\.[A-C]: argument (\d+)$", prompt, re.MULTILINE)
        assert seen == [str(n) for n in range(1, index + 1)], f"speaker {index} saw {seen}"
        for name in DEBATERS:
            assert name not in prompt
        assert "must not concede" in prompt
    fourth = debater_calls[3].messages[-1].content
    assert "STANCES:\nA: keep PostgreSQL\nB: move to DynamoDB\nC: use both" in fourth
    assert "ROUND 1 RECORD:\nR1.A: argument 1\nR1.A1: point 1\nR1.B: argument 2" in fourth
    assert "(stance A). Round 2 of 2." in fourth


async def test_judge_sees_labels_not_names_and_the_winner_maps_back() -> None:
    result, llm = await run(spec())
    judge = next(c for c in llm.calls if c.schema_name == "StancesJudgment")
    prompt = judge.messages[-1].content
    for name in DEBATERS:
        assert name not in prompt
    assert "Debater A" in prompt
    assert result.report["winner"] == "bob"
    assert result.verdict.decision is Decision.ACCEPT
    assert result.verdict.synthesis.startswith("bob prevails (move to DynamoDB)")
    # The independent judge sees the positions lettered from the last: bob is Position B.
    assert [(j.decision, j.agrees) for j in result.judgments] == [("bob", True)]
    components = result.verdict.components
    assert components.value(Component.UNANSWERED) == pytest.approx(0.25)
    assert components.notes[Component.UNANSWERED] == "judge's lead 3 of 10 (scores 8 and 5)"
    # -3.2 + 3.0 (agrees) + 1.1 (nothing cited) - 1.2 x 0.25 + 0.4 (HIGH) = 1.0
    assert result.verdict.confidence == pytest.approx(1 / (1 + math.exp(-1.0)), abs=1e-4)


async def test_no_winner_is_a_synthesis() -> None:
    result, _ = await run(spec(), Script(winner=None))
    assert result.report["winner"] is None
    assert result.verdict.decision is Decision.ACCEPT_WITH_CONDITIONS


async def test_anonymizing_can_be_switched_off() -> None:
    result, llm = await run(spec(anonymize=False), Script(winner="carol"))
    judge = next(c for c in llm.calls if c.schema_name == "StancesJudgment")
    assert "[alice | stance: keep PostgreSQL]" in judge.messages[-1].content
    assert result.report["winner"] == "carol"


def order_in(view: str) -> list[str]:
    return re.findall(r"\[(Debater [A-C])", view)


async def test_shuffle_is_deterministic_under_a_seed_and_differs_under_another() -> None:
    first, _ = await run(spec(seed=3))
    again, _ = await run(spec(seed=3))
    other, _ = await run(spec(seed=11))
    view = first.report["judge_transcript"]
    assert view == again.report["judge_transcript"]
    assert order_in(view) != order_in(other.report["judge_transcript"])
    assert sorted(order_in(view)) == sorted(["Debater A", "Debater B", "Debater C"] * 2)


async def test_an_injected_generator_drives_the_shuffle() -> None:
    s = spec()
    views = []
    for _ in range(2):
        llm = FunctionLLM(Script())

        def resolve(_: ModelSettings, llm: FunctionLLM = llm) -> FunctionLLM:
            return llm

        ledger = TurnLedger(spec=s, resolve_llm=resolve, sink=discard_events)
        protocol = StancesProtocol(rng=random.Random(3))
        result = await protocol.run(s, ledger=ledger, prompts=shipped_prompts())
        assert result.report is not None
        views.append(result.report["judge_transcript"])
    seeded, _ = await run(spec(seed=3))
    assert views[0] == views[1] == seeded.report["judge_transcript"]


async def test_shuffle_off_keeps_the_declared_order() -> None:
    result, _ = await run(spec(shuffle=False))
    assert (
        order_in(result.report["judge_transcript"]) == ["Debater A", "Debater B", "Debater C"] * 2
    )


SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["keep", "move", "both"]},
        "summary": {"type": "string"},
        "risks": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["decision", "summary", "risks"],
}


async def test_the_synthesizer_projects_onto_the_callers_schema() -> None:
    result, _ = await run(spec(synthesizer=True, output_schema=SCHEMA))
    assert result.report["synthesis"] == {
        "decision": "keep",
        "summary": "stay on PostgreSQL",
        "risks": ["cost"],
    }
    assert [t.role for t in result.transcript][-3:] == [
        Role.JUDGE,
        Role.SYNTHESIZER,
        Role.INDEPENDENT_JUDGE,
    ]


def test_stances_specs_are_validated() -> None:
    protocol = get_protocol("stances")
    with pytest.raises(SpecError, match="at least two debaters, each with a stance"):
        protocol.validate(spec({"alice": "x"}))
    with pytest.raises(SpecError, match="needs a stance"):
        protocol.validate(spec({"alice": "x", "bob": " "}))
    with pytest.raises(SpecError, match="needs the synthesizer"):
        protocol.validate(spec(output_schema=SCHEMA))
    with pytest.raises(SpecError, match="has type 'object'"):
        protocol.validate(
            spec(
                synthesizer=True,
                output_schema={"type": "object", "properties": {"x": {"type": "object"}}},
            )
        )
    duplicated = spec()
    duplicated.participants[1].name = "alice"
    with pytest.raises(SpecError, match="unique names"):
        protocol.validate(duplicated)


async def test_more_than_four_rounds_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    result, _ = await run(spec({"alice": "x", "bob": "y"}, rounds=5))
    assert result.report["warnings"]
    assert "5 rounds" in caplog.text
