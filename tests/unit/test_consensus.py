"""`consensus`: code-held phases, schedule, tally and decision rule, on a scripted model."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest

from engine.confidence import Component
from engine.errors import SpecError
from engine.llm import LLMRequest
from engine.models import (
    DebateSpec,
    DebateStatus,
    Decision,
    ModelSettings,
    Participant,
    Role,
)
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
SPEAKER = re.compile(r'debater "([^"]+)"')


def spec(names: list[str], *, max_rounds: int = 2, **options: object) -> DebateSpec:
    return DebateSpec(
        question="Release version 4.2 on Friday?",
        protocol="consensus",
        max_rounds=max_rounds,
        default_model=FAKE,
        participants=[Participant(role=Role.DEBATER, name=n, model=FAKE) for n in names],
        options=options,
    )


def judged(reply: Callable[[LLMRequest], dict[str, str]], decision: str = "revise") -> FunctionLLM:
    """A model that speaks with `reply` and, as the independent judge, decides `decision`."""

    def answer(request: LLMRequest) -> dict[str, str]:
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "the critique was not answered", "decision": decision}
        return reply(request)

    return FunctionLLM(answer)


def voting(votes: dict[str, str]) -> FunctionLLM:
    def reply(request: LLMRequest) -> dict[str, str]:
        match = SPEAKER.search(request.messages[-1].content)
        assert match is not None
        speaker = match.group(1)
        return {
            "stance": f"{speaker} holds a position",
            "rationale": f"{speaker}'s reasons",
            "vote": votes[speaker],
        }

    return judged(reply)


async def test_reference_example_threshold_vote() -> None:
    llm = voting({"planner": "release", "critic": "revise", "operator": "revise"})
    result = await run_debate(
        spec(["planner", "critic", "operator"], threshold=2),
        resolve_llm=lambda _: llm,
        prompts=shipped_prompts(),
    )
    report = result.report
    assert report is not None
    assert report["decision"] == "revise"
    assert report["tally"] == {"release": 1, "revise": 2}
    assert report["decision_rule"] == "threshold_vote"
    assert report["rounds_run"] == 1
    assert report["phase_sequence"] == ["proposal"]
    assert report["speaker_schedule"] == ["planner", "critic", "operator"]
    assert report["lines"] == [
        "debater ids: planner, critic, operator",
        "rounds run: 1",
        "max rounds: 2",
        "phase sequence: proposal",
        "threshold: 2",
        "tally: release=1, revise=2",
        "decision: revise",
        "decision rule: threshold_vote",
        "speaker schedule: planner, critic, operator",
    ]
    debaters = [t.speaker for t in result.transcript if t.role is Role.DEBATER]
    assert debaters == ["planner", "critic", "operator"]
    assert [t.role for t in result.transcript][-1] is Role.INDEPENDENT_JUDGE
    assert result.verdict.decision is Decision.REVISE
    components = result.verdict.components
    assert components is not None
    assert components.value(Component.UNANSWERED) == pytest.approx(1 / 3)
    assert components.notes[Component.UNANSWERED] == "1 of 3 debaters not behind the decision"
    assert components.value(Component.AGREEMENT) == 1.0
    assert components.value(Component.DECLARED) is None
    # -3.2 + 3.0 (the judge agrees) + 1.1 (nothing cited) - 1.2 / 3 + 0.2 (nothing declared)
    assert result.verdict.confidence == pytest.approx(1 / (1 + math.exp(-0.7)), abs=1e-4)


async def test_reference_example_max_rounds_exhausted() -> None:
    llm = voting({"planner": "release", "critic": "revise", "operator": "escalate"})
    result = await run_debate(
        spec(["planner", "critic", "operator"], threshold=2),
        resolve_llm=lambda _: llm,
        prompts=shipped_prompts(),
    )
    report = result.report
    assert report is not None
    assert report["decision_rule"] == "max_rounds_exhausted"
    assert report["decision"] == "escalate"
    assert report["rounds_run"] == 2
    assert report["tally"] == {"release": 1, "revise": 1, "escalate": 1}
    assert report["phase_sequence"] == [
        "proposal",
        "critique",
        "revision",
        "consensus",
        "critique",
        "revision",
        "consensus",
    ]
    assert len([t for t in result.transcript if t.role is Role.DEBATER]) == 3 * 7
    assert result.verdict.decision is Decision.ESCALATE
    assert result.verdict.escalate
    assert result.status is DebateStatus.COMPLETE


async def test_only_the_latest_vote_of_each_debater_counts() -> None:
    changing = {"a": ["revise", "release"], "b": ["release"], "c": ["escalate"]}
    said: dict[str, int] = {}

    def reply(request: LLMRequest) -> dict[str, str]:
        match = SPEAKER.search(request.messages[-1].content)
        assert match is not None
        name = match.group(1)
        index = min(said.get(name, 0), len(changing[name]) - 1)
        said[name] = said.get(name, 0) + 1
        return {"stance": "s", "rationale": "r", "vote": changing[name][index]}

    llm = judged(reply)
    result = await run_debate(
        spec(["a", "b", "c"]), resolve_llm=lambda _: llm, prompts=shipped_prompts()
    )
    assert result.report is not None
    assert result.report["tally"] == {"release": 2, "escalate": 1}
    assert result.report["phase_sequence"] == ["proposal", "critique"]


async def test_a_vote_outside_the_vote_set_is_reasked() -> None:
    replies = iter(["maybe", "release", "release"])

    def reply(request: LLMRequest) -> dict[str, str]:
        return {"stance": "s", "rationale": "r", "vote": next(replies)}

    llm = judged(reply, "release")
    result = await run_debate(
        spec(["a", "b"], max_rounds=1), resolve_llm=lambda _: llm, prompts=shipped_prompts()
    )
    assert result.transcript[0].reasks == 1
    assert result.report is not None
    assert result.report["decision"] == "release"


def test_consensus_specs_are_validated() -> None:
    from engine.protocols import get_protocol

    protocol = get_protocol("consensus")
    with pytest.raises(SpecError, match="at least 2 debaters"):
        protocol.validate(spec(["solo"]))
    with pytest.raises(SpecError, match="unique"):
        protocol.validate(spec(["a", "a"]))
    with pytest.raises(SpecError, match="between a majority"):
        protocol.validate(spec(["a", "b", "c"], threshold=1))
    with pytest.raises(SpecError, match="votes must be distinct"):
        protocol.validate(spec(["a", "b"], votes=["go", "go"]))
