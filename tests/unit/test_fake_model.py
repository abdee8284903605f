"""The schema-filling fake model: valid output for every protocol's types with no re-ask,
deterministic per seed, and one round record per round or phase, of the protocol's own kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel, Field

from engine.errors import LLMError
from engine.events import DebateEvent, RoundFinished
from engine.llm import LLMRequest, output_schema
from engine.models import DebateResult, DebateSpec, DebateStatus, ModelSettings, Participant, Role
from engine.protocols.consensus import PHASES
from engine.protocols.structured import cross_type, opening_type
from engine.protocols.structured_judge import side_judgment_type
from engine.providers.fake import (
    CANNED_DEBATE_REPLIES,
    FunctionLLM,
    SchemaFillingLLM,
    fill_schema,
)
from engine.rounds import ConsensusPhase, PanelRound, StancesRound, StructuredPhase
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
RecordT = TypeVar("RecordT")


def debaters(*names: str, stances: bool = False) -> list[Participant]:
    return [
        Participant(
            role=Role.DEBATER,
            name=name,
            stance=f"{name} is right" if stances else None,
            model=FAKE,
        )
        for name in names
    ]


SPECS: dict[str, dict[str, Any]] = {
    "adversarial": {"max_rounds": 2},
    "stances": {"max_rounds": 2, "participants": debaters("ana", "ben", stances=True)},
    "consensus": {"max_rounds": 2, "participants": debaters("ana", "ben", "cy")},
    "structured": {"max_rounds": 1},
    "panel": {"max_rounds": 3, "participants": debaters("ana", "ben", "cy")},
    "panel-judge": {
        "protocol": "panel",
        "max_rounds": 2,
        "participants": [*debaters("ana", "ben"), Participant(role=Role.JUDGE, model=FAKE)],
        "options": {"aggregation": "judge"},
    },
}


def spec_for(name: str) -> DebateSpec:
    fields = {"protocol": name, **SPECS[name]}
    return DebateSpec(question="Adopt a queue for billing retries?", default_model=FAKE, **fields)


async def run(name: str, seed: int, **llm: Any) -> tuple[DebateResult, list[RoundFinished]]:
    rounds: list[RoundFinished] = []

    async def sink(event: DebateEvent) -> None:
        if isinstance(event, RoundFinished):
            rounds.append(event)

    model = SchemaFillingLLM(seed=seed, **llm)
    result = await run_debate(
        spec_for(name), resolve_llm=lambda _: model, prompts=shipped_prompts(), sink=sink
    )
    return result, rounds


def of_kind(kind: type[RecordT], records: Sequence[object]) -> list[RecordT]:
    """`records`, asserted to be all of the protocol's own round record type."""
    narrowed = [record for record in records if isinstance(record, kind)]
    assert len(narrowed) == len(records), f"every record is a {kind.__name__}"
    return narrowed


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("seed", range(4))
async def test_every_protocol_completes_on_filled_schemas_without_a_reask(
    name: str, seed: int
) -> None:
    result, rounds = await run(name, seed)
    assert result.status is DebateStatus.COMPLETE, result.error
    assert result.transcript
    assert all(turn.reasks == 0 for turn in result.transcript)
    keys = [turn.key for turn in result.transcript]
    assert len(set(keys)) == len(keys), "every turn has its own key, so a resume replays it"
    assert rounds, "every protocol reports its rounds"
    assert {event.record.kind for event in rounds} == {spec_for(name).protocol}


@pytest.mark.parametrize("name", ["stances", "consensus", "structured", "panel"])
async def test_round_records_follow_the_protocol(name: str) -> None:
    result, rounds = await run(name, seed=3)
    records = [event.record for event in rounds]
    report = result.report or {}
    if name == "stances":
        stances = of_kind(StancesRound, records)
        assert [r.round for r in stances] == [1, 2]
        assert all([a.speaker for a in r.arguments] == ["ana", "ben"] for r in stances)
    elif name == "consensus":
        phases = of_kind(ConsensusPhase, records)
        assert [r.phase for r in phases] == report["phase_sequence"]
        assert phases[-1].tally == report["tally"]
    elif name == "structured":
        structured = of_kind(StructuredPhase, records)
        assert [r.phase for r in structured] == [
            "openings",
            "cross_examination",
            "closings",
            "judgment",
        ]
        judged = structured[-1].judgment
        assert judged is not None
        assert judged.totals == pytest.approx(report["side_totals"], abs=1e-4)
    else:
        panels = of_kind(PanelRound, records)
        assert [r.round for r in panels] == [h["round"] for h in report["rounds"]]
        assert panels[-1].convergence == report["rounds"][-1]["convergence"]
    assert len({r.slot for r in records}) == len(records), "each record has its own slot"


async def test_the_same_seed_gives_the_same_debate_and_another_seed_another() -> None:
    first, _ = await run("consensus", seed=11)
    again, _ = await run("consensus", seed=11)
    other, _ = await run("consensus", seed=12)
    assert [t.parsed for t in first.transcript] == [t.parsed for t in again.transcript]
    assert [t.parsed for t in first.transcript] != [t.parsed for t in other.transcript]


async def test_the_script_takes_precedence_for_its_schemas() -> None:
    result, _ = await run("adversarial", seed=0, script=CANNED_DEBATE_REPLIES)
    assert result.verdict.synthesis == CANNED_DEBATE_REPLIES["ModeratorTurn"]["synthesis"]


def test_patterns_number_list_items_in_order() -> None:
    opening = opening_type("CON")
    value = opening.model_validate(fill_schema(output_schema(opening), seed=5))
    ids = [a.id for a in value.arguments]
    assert ids == [f"CON-{n}" for n in range(1, len(ids) + 1)]


def test_enum_typed_lists_name_every_member_once() -> None:
    opposing = ["PRO-1", "PRO-2", "PRO-3", "PRO-4"]
    cross = cross_type(opposing)
    for seed in range(10):
        value = cross.model_validate(fill_schema(output_schema(cross), seed=seed))
        assert (
            sorted(str(getattr(r.target, "value", r.target)) for r in value.responses) == opposing
        )


def test_keyed_objects_get_every_key() -> None:
    ids = ["PRO-1", "PRO-2", "PRO-3", "PRO-4", "PRO-5"]
    judgment = side_judgment_type(ids)
    value = judgment.model_validate(fill_schema(output_schema(judgment), seed=1))
    assert set(value.scores.model_dump(by_alias=True)) == set(ids)
    assert set(value.trace.model_dump(by_alias=True)) == set(ids)


def test_bounds_are_respected() -> None:
    class Bounded(BaseModel):
        code: str = Field(pattern=r"^[A-Z]{3}-\d{2}$")
        short: str = Field(min_length=50, max_length=60)
        score: int = Field(ge=3, le=4)
        share: float = Field(ge=0.2, le=0.3)
        items: list[int] = Field(min_length=4, max_length=4)

    for seed in range(20):
        Bounded.model_validate(fill_schema(output_schema(Bounded), seed=seed))


def test_an_unsupported_pattern_is_a_clear_error() -> None:
    class Grouped(BaseModel):
        code: str = Field(pattern=r"^(ab|cd)$")

    with pytest.raises(LLMError, match="cannot fill the pattern"):
        fill_schema(output_schema(Grouped))


async def test_a_consensus_debater_speaks_once_per_phase_under_distinct_keys() -> None:
    """Every phase of a round is its own turn: a key shared across phases would make a resumed
    debate replay the proposal as the critique (and the store refuse the second write)."""
    votes = {"ana": "release", "ben": "revise", "cy": "escalate"}

    def split_panel(request: LLMRequest) -> dict[str, Any]:
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "nobody agrees", "decision": "escalate"}
        speaker = next(name for name in votes if f'"{name}"' in request.messages[-1].content)
        return {"stance": f"{speaker} holds", "rationale": "because", "vote": votes[speaker]}

    spec = spec_for("consensus")
    result = await run_debate(
        spec, resolve_llm=lambda _: FunctionLLM(split_panel), prompts=shipped_prompts()
    )
    phases = [turn.phase for turn in result.transcript]
    assert phases[:12] == [p for p in PHASES for _ in range(3)]
    # 21 debaters' turns and the independent judge's.
    assert len({turn.key for turn in result.transcript}) == len(result.transcript) == 22
