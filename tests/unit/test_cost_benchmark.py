"""The cost benchmark's inputs (benchmarks/cost.py): replies that every role's output type
accepts, of a realistic length, the same for the same call; the word limits a role's prompt
sets kept; and the short and long cases it measures."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from benchmarks.cost import SCENARIOS, example_cases, realistic_reply, word_limit
from benchmarks.vendor_cache import estimate_tokens
from engine.judging import judgment_type
from engine.llm import LLMRequest, Message, output_schema
from engine.models import CriticTurn, ModeratorTurn, ProposerTurn, Proposition, RebuttalTurn
from engine.protocols.consensus import turn_type
from engine.protocols.panel import revision_type
from engine.protocols.stances import judge_type
from engine.protocols.structured import cross_type, opening_type
from engine.protocols.structured_judge import ruling_type, side_judgment_type
from engine.rounds import Closing
from engine.single import SingleReview

TYPES: list[type[BaseModel]] = [
    SingleReview,
    Proposition,
    ProposerTurn,
    CriticTurn,
    RebuttalTurn,
    ModeratorTurn,
    turn_type(["release", "revise", "escalate"]),
    revision_type(["architect", "security"]),
    judge_type(["A", "B"]),
    opening_type("PRO"),
    cross_type(["CON-1", "CON-2", "CON-3"]),
    side_judgment_type(["PRO-1", "PRO-2", "PRO-3"]),
    ruling_type(["PRO-1", "PRO-2", "PRO-3", "CON-1", "CON-2", "CON-3"]),
    judgment_type(["accept", "revise", "Position A"]),
]


@pytest.mark.parametrize("kind", TYPES, ids=lambda kind: kind.__name__)
@pytest.mark.parametrize("index", [0, 1, 5])
def test_replies_are_valid_for_every_role_and_the_same_for_the_same_call(
    kind: type[BaseModel], index: int
) -> None:
    schema = output_schema(kind)
    reply = realistic_reply(schema, index)
    kind.model_validate(reply)
    assert realistic_reply(schema, index) == reply


def test_replies_run_to_a_realistic_length_and_take_enum_values_in_turn() -> None:
    review = realistic_reply(output_schema(SingleReview), 0)
    assert 400 <= estimate_tokens(json.dumps(review)) <= 900
    assert 800 <= len(review["synthesis"]) < 820  # 40 % of its 2,000-character limit
    assert len(review["risks"]) == 3
    votes = turn_type(["release", "revise", "escalate"])
    assert [realistic_reply(output_schema(votes), i)["vote"] for i in range(3)] == [
        "release",
        "revise",
        "escalate",
    ]


def test_a_word_limit_in_the_role_prompt_is_kept() -> None:
    request = LLMRequest(
        model="m",
        messages=[
            Message(role="system", content="rules"),
            Message(role="user", content="Closing statement, at most 200 words in all."),
        ],
    )
    assert word_limit(request) == 200
    unlimited = realistic_reply(output_schema(Closing), 3)
    with pytest.raises(ValueError, match="at most 200"):
        Closing.model_validate(unlimited)
    closing = realistic_reply(output_schema(Closing), 3, word_limit(request))
    Closing.model_validate(closing)
    assert len(closing["final_position"]) < len(unlimited["final_position"])


def test_the_long_case_carries_about_4300_tokens_of_documents_and_the_short_one_a_case() -> None:
    short, long = example_cases()
    assert len(short.documents) == 1
    assert 300 <= short.document_tokens <= 600
    assert long.question == short.question
    assert long.documents[0] == short.documents[0]
    assert 4_300 <= long.document_tokens <= 4_800


def test_each_protocol_runs_at_1_2_and_3_rounds_except_structured_which_has_one() -> None:
    names = [scenario.name for scenario in SCENARIOS]
    assert names[:2] == ["single review, debaters' model", "single review, moderator's model"]
    assert "adversarial, 3 rounds" in names
    assert "panel, 3 rounds" in names
    assert [n for n in names if n.startswith("structured")] == ["structured, 1 round"]
