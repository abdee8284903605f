"""Structured output: lenient parsing, validation, bounded re-asks and loud failure."""

from __future__ import annotations

import json

import pytest

from engine.errors import StructuredOutputError
from engine.llm import (
    LLMRequest,
    Message,
    complete_structured,
    describe_schema,
    output_schema,
    parse_json_lenient,
)
from engine.models import CriticTurn, ModeratorTurn
from engine.providers.fake import ScriptedLLM
from tests.helpers import reply_for

REQUEST = LLMRequest(messages=[Message(role="user", content="critique")], model="fake-model")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Sure! Here it is: {"a": "b"} Hope that helps.', {"a": "b"}),
        ('{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}),
        ('{"a": "cut off mid-str', {"a": "cut off mid-str"}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": {"b": 1}, "c":', {"a": {"b": 1}, "c": None}),
    ],
)
def test_lenient_parser_repairs_common_breakage(text: str, expected: object) -> None:
    assert parse_json_lenient(text) == expected


@pytest.mark.parametrize("text", ["no json here", "", "[1, 2, 3]"])
def test_lenient_parser_gives_up_on_hopeless_text(text: str) -> None:
    with pytest.raises(ValueError, match="JSON"):
        parse_json_lenient(text)


async def test_valid_reply_passes_first_time() -> None:
    llm = ScriptedLLM([reply_for("critic")])
    result = await complete_structured(llm, REQUEST, CriticTurn)

    assert result.value.challenge_strength == 7
    assert result.reasks == 0
    assert llm.calls[0].output_schema == output_schema(CriticTurn)
    assert llm.calls[0].schema_name == "CriticTurn"


async def test_bad_json_is_re_asked_with_the_problem() -> None:
    llm = ScriptedLLM(["this is not json at all", reply_for("critic")])
    result = await complete_structured(llm, REQUEST, CriticTurn)

    assert result.reasks == 1
    assert len(result.completions) == 2
    correction = llm.calls[1].messages[-1].content
    assert "Your reply was invalid" in correction
    assert llm.calls[1].messages[-2].content == "this is not json at all"


async def test_out_of_range_score_is_invalid_output_not_data() -> None:
    absurd = reply_for("critic", challenge_strength=1_000_000)
    llm = ScriptedLLM([absurd, reply_for("critic", challenge_strength=9)])
    result = await complete_structured(llm, REQUEST, CriticTurn)

    assert result.value.challenge_strength == 9
    assert "challenge_strength" in llm.calls[1].messages[-1].content
    assert "less than or equal to 10" in llm.calls[1].messages[-1].content


async def test_persistently_invalid_output_fails_loudly_after_the_bound() -> None:
    absurd = json.dumps(reply_for("critic", challenge_strength=1_000_000))
    llm = ScriptedLLM([absurd, "garbage", absurd, reply_for("critic")])

    with pytest.raises(StructuredOutputError, match="no valid CriticTurn in 3 attempts") as info:
        await complete_structured(llm, REQUEST, CriticTurn)

    assert info.value.raw_outputs == [absurd, "garbage", absurd]
    assert len(llm.calls) == 3


def test_output_schema_is_self_contained_and_closed() -> None:
    schema = output_schema(ModeratorTurn)
    text = json.dumps(schema)

    assert "$ref" not in text
    assert "$defs" not in schema
    assert schema["additionalProperties"] is False
    quality = schema["properties"]["proposer_quality"]
    assert quality["properties"]["logic"] == {"maximum": 10, "minimum": 1, "type": "integer"}
    assert quality["required"] == ["logic", "evidence", "completeness", "consistency"]


def test_schema_description_names_every_field_without_placeholders() -> None:
    text = describe_schema(output_schema(CriticTurn))

    for field in ("thesis", "counter_arguments", "evidence_cited", "challenge_strength"):
        assert f'"{field}"' in text
    assert "an integer from 1 to 10" in text
    assert '"string"' not in text
