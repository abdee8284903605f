"""`panel`: concurrency, clustering and early stop, the three aggregations, the judge fallback,
changes without a reason, and adaptive routing."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import pytest

from engine.confidence import Component
from engine.errors import SpecError
from engine.llm import LLMRequest
from engine.models import DebateSpec, Decision, ModelSettings, Participant, Role
from engine.protocols import get_protocol
from engine.protocols.panel import cluster, convergence
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
SPEAKER = re.compile(r'panelist "([^"]+)"')
SIMILAR_A = "Adopt the queue because retries become safe and ordered"
SIMILAR_B = "Adopt the queue because retries become safe and ordered per tenant"
DIFFERENT = "Reject it: the team cannot operate another stateful system"


def spec(
    weights: dict[str, float] | None = None,
    rounds: int = 3,
    router: bool = False,
    **options: Any,
) -> DebateSpec:
    weights = weights or {"ana": 1.0, "ben": 1.0, "cy": 1.0}
    participants = [
        Participant(role=Role.DEBATER, name=n, weight=w, role_hint=f"{n}'s view", model=FAKE)
        for n, w in weights.items()
    ]
    if router:
        participants.append(Participant(role=Role.ROUTER, model=FAKE))
    return DebateSpec(
        question="Adopt a message queue for billing retries?",
        protocol="panel",
        max_rounds=rounds,
        default_model=FAKE,
        participants=participants,
        options=options,
    )


class PanelLLM(FunctionLLM):
    """The panel's fake model, keeping how many answers were in flight and in which order."""

    in_flight: dict[str, int]
    events: list[tuple[str, str, str]]


def panel(
    answers: dict[str, tuple[str, float]],
    *,
    judge: Any = None,
    router_confidence: float = 0.5,
    delay_s: float = 0.0,
    independent: str = "accept",
) -> PanelLLM:
    in_flight = {"now": 0, "peak": 0}
    events: list[tuple[str, str, str]] = []

    async def reply(request: LLMRequest) -> Any:
        prompt = request.messages[-1].content
        if request.schema_name == "PanelJudgment":
            return judge
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "the queue makes retries safe", "decision": independent}
        match = SPEAKER.search(prompt)
        name = match.group(1) if match else "router"
        if name == "router":
            return {"decision": "accept", "answer": "Adopt it.", "confidence": router_confidence}
        text, confidence = answers[name]
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        events.append(("start", name, request.schema_name or ""))
        await asyncio.sleep(delay_s)
        events.append(("end", name, request.schema_name or ""))
        in_flight["now"] -= 1
        decision = "reject" if text == DIFFERENT else "accept"
        base = {"decision": decision, "answer": text, "confidence": confidence}
        if request.schema_name == "PanelAnswer":
            return base
        peers = [p for p in answers if p != name]
        return base | {
            "critiques": [{"peer": p, "critique": f"{p} misses the cost"} for p in peers],
            "changed_from_previous": False,
            "change_justification": None,
        }

    llm = PanelLLM(reply)
    llm.in_flight = in_flight
    llm.events = events
    return llm


async def run(s: DebateSpec, llm: FunctionLLM) -> Any:
    return await run_debate(s, resolve_llm=lambda _: llm, prompts=shipped_prompts())


def test_clustering_by_word_set_jaccard() -> None:
    clusters = cluster([SIMILAR_A, DIFFERENT, SIMILAR_B], 0.4)
    assert clusters == [[0, 2], [1]]
    assert convergence(clusters, 3) == pytest.approx(2 / 3)


async def test_the_first_answer_goes_alone_then_the_others_together() -> None:
    """The first panelist answers alone, so the others read the case from the vendor's prefix
    cache instead of each writing it; the others, and every later round, run concurrently."""
    llm = panel(
        {"ana": (SIMILAR_A, 0.9), "ben": (DIFFERENT, 0.9), "cy": (SIMILAR_A, 0.5)}, delay_s=0.05
    )
    result = await run(spec(rounds=2), llm)
    answers = [(kind, name) for kind, name, schema in llm.events if schema == "PanelAnswer"]
    assert answers[:2] == [("start", "ana"), ("end", "ana")], "the lead alone"
    assert [kind for kind, _ in answers[2:]] == ["start", "start", "end", "end"], "then together"
    assert llm.in_flight["peak"] == 3, "the revisions were in flight together"
    assert len([t for t in result.transcript if t.round == 1]) == 3


async def test_convergence_stops_early() -> None:
    llm = panel({"ana": (SIMILAR_A, 0.9), "ben": (SIMILAR_B, 0.8), "cy": (SIMILAR_A, 0.7)})
    result = await run(spec(rounds=3), llm)
    assert [r["round"] for r in result.report["rounds"]] == [1]
    assert result.report["rounds"][0]["convergence"] == 1.0
    assert result.verdict.decision is Decision.ACCEPT
    assert not result.verdict.escalate


async def test_no_convergence_runs_every_round_and_escalates() -> None:
    other = "Defer the decision until the load test finishes next quarter"
    llm = panel({"ana": (SIMILAR_A, 0.9), "ben": (DIFFERENT, 0.9), "cy": (other, 0.9)})
    result = await run(spec(rounds=2), llm)
    assert [r["round"] for r in result.report["rounds"]] == [1, 2]
    assert result.verdict.escalate
    assert any("did not converge" in r for r in result.verdict.escalation_reasons)
    revisions = [t for t in result.transcript if t.round == 2 and t.role is Role.DEBATER]
    assert all(len(t.parsed["critiques"]) == 2 for t in revisions)


async def test_majority_aggregation_takes_the_largest_cluster() -> None:
    llm = panel({"ana": (SIMILAR_A, 0.6), "ben": (DIFFERENT, 0.99), "cy": (SIMILAR_B, 0.7)})
    result = await run(spec(rounds=1), llm)
    assert result.verdict.synthesis == SIMILAR_B
    assert result.verdict.decision is Decision.ACCEPT


async def test_weighted_aggregation_sums_weight_times_confidence() -> None:
    llm = panel({"ana": (SIMILAR_A, 0.3), "ben": (DIFFERENT, 0.95), "cy": (SIMILAR_B, 0.3)})
    result = await run(
        spec({"ana": 1.0, "ben": 3.0, "cy": 1.0}, rounds=1, aggregation="weighted"), llm
    )
    assert result.report["cluster_weights"] == pytest.approx([0.6, 2.85])
    assert result.verdict.synthesis == DIFFERENT
    assert result.verdict.decision is Decision.REJECT


async def test_judge_aggregation_and_its_fallback_to_majority() -> None:
    answers = {"ana": (SIMILAR_A, 0.6), "ben": (DIFFERENT, 0.9), "cy": (SIMILAR_B, 0.7)}
    judged = await run(
        spec(rounds=1, aggregation="judge"),
        panel(answers, judge={"chosen": 2, "reasoning": "Operating cost decides it."}),
    )
    assert judged.verdict.synthesis == DIFFERENT
    assert "aggregation_fallback" not in judged.report
    garbled = await run(spec(rounds=1, aggregation="judge"), panel(answers, judge="I pick ben!"))
    assert garbled.verdict.synthesis == SIMILAR_B
    assert garbled.report["aggregation_fallback"].startswith("majority (the judge's output")


async def test_a_change_without_the_flag_keeps_the_previous_answer() -> None:
    said: dict[str, int] = {}

    def reply(request: LLMRequest) -> Any:
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "the queue makes retries safe", "decision": "accept"}
        name = SPEAKER.search(request.messages[-1].content).group(1)  # type: ignore[union-attr]
        said[name] = said.get(name, 0) + 1
        if request.schema_name == "PanelAnswer":
            text = DIFFERENT if name == "cy" else SIMILAR_A
            return {"decision": "accept", "answer": text, "confidence": 0.8}
        return {
            "decision": "accept",
            "answer": SIMILAR_A,
            "confidence": 0.8,
            "critiques": [{"peer": p, "critique": "c"} for p in ("ana", "ben", "cy") if p != name],
            "changed_from_previous": False,
        }

    result = await run(spec(rounds=2), FunctionLLM(reply))
    assert result.report["answers"]["cy"]["answer"] == DIFFERENT
    assert result.report["rounds"][-1]["convergence"] == pytest.approx(2 / 3)


async def test_a_confident_fast_model_skips_the_panel() -> None:
    answers = {"ana": (SIMILAR_A, 0.6), "ben": (DIFFERENT, 0.9), "cy": (SIMILAR_B, 0.7)}
    routed = await run(spec(router=True), panel(answers, router_confidence=0.9))
    assert routed.report["routing"] == "single_agent"
    assert [t.role for t in routed.transcript] == [Role.ROUTER, Role.INDEPENDENT_JUDGE]
    components = routed.verdict.components
    assert components is not None
    assert components.value(Component.DECLARED) == pytest.approx(0.9)
    assert components.value(Component.UNANSWERED) is None
    # -3.2 + 3.0 (the judge agrees) + 1.1 (nothing cited) - 0.6 (unanswered not measured) + 0.36
    assert routed.verdict.confidence == pytest.approx(1 / (1 + math.exp(-0.66)), abs=1e-4)
    debated = await run(spec(router=True, rounds=1), panel(answers, router_confidence=0.5))
    assert debated.report["routing"] == "debate"
    assert [t.role for t in debated.transcript].count(Role.DEBATER) == 3


def test_panel_specs_are_validated() -> None:
    protocol = get_protocol("panel")
    with pytest.raises(SpecError, match="at least 2 debaters"):
        protocol.validate(spec({"solo": 1.0}))
    with pytest.raises(SpecError, match="aggregation"):
        protocol.validate(spec(aggregation="vibes"))
