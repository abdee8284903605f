"""The schema handed to llama.cpp's grammar converter (pure; no model loaded)."""

from __future__ import annotations

from engine.llm import output_schema
from engine.models import CriticTurn, ModeratorTurn
from engine.providers.local import GRAMMAR_MAX_ITEMS, GRAMMAR_MAX_STRING, grammar_schema


def test_integer_ranges_become_enums() -> None:
    schema = grammar_schema(output_schema(CriticTurn))
    assert schema["properties"]["challenge_strength"] == {"enum": list(range(1, 11))}
    quality = grammar_schema(output_schema(ModeratorTurn))["properties"]["critic_quality"]
    assert quality["properties"]["logic"] == {"enum": list(range(1, 11))}


def test_strings_and_lists_are_capped_within_validation_bounds() -> None:
    schema = grammar_schema(output_schema(CriticTurn))
    thesis = schema["properties"]["thesis"]
    arguments = schema["properties"]["counter_arguments"]
    assert thesis == {"maxLength": GRAMMAR_MAX_STRING, "minLength": 1, "type": "string"}
    assert arguments["maxItems"] == GRAMMAR_MAX_ITEMS
    assert arguments["minItems"] == 1
    assert arguments["items"]["maxLength"] == GRAMMAR_MAX_STRING


def test_enums_and_booleans_pass_through() -> None:
    schema = grammar_schema(output_schema(ModeratorTurn))
    assert schema["properties"]["decision"]["enum"][0] == "accept"
    assert schema["properties"]["recommend_another_round"] == {"type": "boolean"}
