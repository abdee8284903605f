"""A debate builds no schema type, JSON schema or prose description that an earlier debate with
the same names already built (issue 47 item 3: a judge's type built per debate, and so its JSON
schema, doubled a worker's CPU over 200 debates)."""

from __future__ import annotations

import pytest

from engine.judging import judgment_type
from engine.llm import describe_output, output_schema
from engine.models import DebateStatus
from engine.protocols.consensus import turn_type
from engine.protocols.panel import revision_type
from engine.protocols.stances import judge_type
from engine.protocols.structured import cross_type, opening_type
from engine.protocols.structured_judge import ruling_type, side_judgment_type
from tests.unit.test_fake_model import SPECS, run


@pytest.mark.parametrize("name", list(SPECS))
async def test_a_second_debate_with_the_same_names_builds_no_schema(name: str) -> None:
    first, _ = await run(name, seed=5)
    assert first.status is DebateStatus.COMPLETE, first.error
    assert any(turn.speaker.startswith("judge-") for turn in first.transcript), "a judge spoke"
    schemas, descriptions = output_schema.cache_info(), describe_output.cache_info()
    again, _ = await run(name, seed=5)
    assert again.status is DebateStatus.COMPLETE, again.error
    assert output_schema.cache_info().misses == schemas.misses
    assert describe_output.cache_info().misses == descriptions.misses


def test_each_per_debate_type_is_one_type_per_list_of_names() -> None:
    ids = ["PRO-1", "PRO-2", "PRO-3"]
    assert judgment_type(["accept", "reject"]) is judgment_type(["accept", "reject"])
    assert judgment_type(["accept", "reject"]) is not judgment_type(["reject", "accept"])
    assert turn_type(["yes", "no"]) is turn_type(["yes", "no"])
    assert revision_type(["ana", "ben"]) is revision_type(["ana", "ben"])
    assert judge_type(["A", "B"]) is judge_type(["A", "B"])
    assert side_judgment_type(ids) is side_judgment_type(list(ids))
    assert ruling_type(ids) is ruling_type(list(ids))
    assert cross_type(ids) is cross_type(list(ids))
    assert opening_type("CON") is opening_type("CON")


def test_a_shared_judgment_type_still_refuses_a_decision_outside_its_names() -> None:
    judged = judgment_type(["accept", "reject"])
    with pytest.raises(ValueError, match="accept"):
        judged.model_validate({"reasoning": "the record shows it", "decision": "maybe"})
    answer = judged.model_validate({"reasoning": "the record shows it", "decision": "reject"})
    assert answer.decision == "reject"
