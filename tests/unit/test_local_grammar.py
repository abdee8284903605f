"""The schema handed to llama.cpp's grammar converter, and the longest reply it allows (pure; no
model loaded)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel, Field

from bot.settings import Settings
from bot.wiring import build_services
from engine.errors import SchemaTooLargeError
from engine.llm import LLMRequest, Message, output_schema
from engine.models import CriticTurn, DebateSpec, ModeratorTurn, Role
from engine.protocols.structured import cross_type, opening_type
from engine.protocols.structured_judge import ruling_type, side_judgment_type
from engine.providers.fake import SchemaFillingLLM
from engine.providers.grammar import (
    FIT_MIN_STRING,
    GRAMMAR_MARGIN,
    GRAMMAR_MAX_ITEMS,
    GRAMMAR_MAX_STRING,
    TEXT_CLASS,
    fitted_schema,
    grammar_schema,
    pattern_bytes,
    plain_text,
    worst_case_bytes,
)
from engine.providers.local import LlamaConfig, LlamaSession
from engine.runner import run_debate
from engine.single import pick_best, single_review
from engine.triage import triage

QUESTION = "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?"
PROTOCOLS: dict[str, dict[str, Any]] = {
    "adversarial": {"rounds": 2},
    "stances": {"stances_for": ["keep cron"], "stances_against": ["move to CronJobs"]},
    "consensus": {},
    "structured": {},
    "panel": {"route": True, "options": {"aggregation": "judge"}},
}
MOST_ARGUMENTS = 5
"""The structured protocol's arguments per side at most (`Opening`: 3 to 5)."""


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


class Small(BaseModel):
    level: int = Field(ge=1, le=10)
    words: list[str] = Field(max_length=2)
    count: int
    done: bool


def test_the_worst_case_is_the_longest_reply_byte_for_byte() -> None:
    """The longest reply the converter's grammar admits: a space after every separator and
    every value but an enum's, the longest enum value, full lists of full strings, a 16-digit
    signed integer."""
    schema = plain_text(grammar_schema(output_schema(Small), max_string=3, max_items=2))
    longest = (
        '{ "level" : 10, "words" : [ "~~~" , "~~~" ] , "count" : -1234567890123456 ,'
        ' "done" : false } '
    )
    assert worst_case_bytes(schema) == len(longest.encode("utf-8"))


def test_free_text_is_printable_ascii_without_escapes() -> None:
    """One character is one byte, so a string's maxLength is its bytes: the converter builds the
    text from `TEXT_CLASS` alone, never from its own rule that allows six-byte escapes, and puts
    at most one space between tokens of the JSON (the count assumes both)."""
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = fitted_schema(output_schema(ModeratorTurn), 1024)
    gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
    assert TEXT_CLASS in gbnf
    assert "char ::=" not in gbnf
    assert grammar.SPACE_RULE == '" "?'
    allowed = [chr(c) for c in range(0x110) if re.fullmatch(TEXT_CLASS, chr(c))]
    assert allowed == [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\']


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^PRO-[1-5]$", 5),
        (rf"^{TEXT_CLASS}{{0,7}}$", 7),
        (r"^a?b{2}c{1,4}$", 7),
        (r"^é.$", 2 + 4),
        (r"^[^x]\d$", 4 + 1),
    ],
)
def test_pattern_bytes_counts_the_longest_match(pattern: str, expected: int) -> None:
    assert pattern_bytes(pattern) == expected


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object"},
        {"type": "string"},
        {"type": "array", "items": {"type": "boolean"}},
        {"type": "string", "pattern": "^a+$"},
        {"type": "string", "pattern": "^(a|b)$"},
    ],
)
def test_a_part_without_a_bound_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaTooLargeError, match="bound"):
        worst_case_bytes(schema)


def test_fitting_keeps_the_schemas_own_minimums() -> None:
    schema = fitted_schema(output_schema(opening_type("PRO")), 512)
    arguments = schema["properties"]["arguments"]
    reasoning = arguments["items"]["properties"]["reasoning"]["pattern"]
    assert arguments["minItems"] == 3
    assert arguments["maxItems"] == 3
    assert reasoning == f"^{TEXT_CLASS}{{40,40}}$"
    assert worst_case_bytes(schema) <= 512


def test_lists_give_up_items_before_text_falls_below_a_sentence() -> None:
    schema = fitted_schema(output_schema(ModeratorTurn), 1024)
    properties = schema["properties"]
    assert properties["resolved_points"]["maxItems"] < GRAMMAR_MAX_ITEMS
    assert _text_cap(properties["synthesis"]) >= FIT_MIN_STRING
    roomy = fitted_schema(output_schema(ModeratorTurn), 4096)
    assert roomy["properties"]["resolved_points"]["maxItems"] == GRAMMAR_MAX_ITEMS
    assert _text_cap(roomy["properties"]["synthesis"]) == GRAMMAR_MAX_STRING


def _text_cap(node: dict[str, Any]) -> int:
    return int(node["pattern"].rsplit(",", 1)[1].split("}")[0])


def test_a_schema_that_cannot_fit_says_which_setting_to_raise() -> None:
    schema = output_schema(side_judgment_type([f"PRO-{n}" for n in range(1, 6)]))
    with pytest.raises(SchemaTooLargeError, match="DEBATEBOT_MAX_TOKENS") as refused:
        fitted_schema(schema, 512, "SideJudgment")
    needed = int(str(refused.value).rsplit(" ", 1)[1].replace(",", ""))
    assert worst_case_bytes(fitted_schema(schema, needed)) <= needed
    with pytest.raises(SchemaTooLargeError):
        fitted_schema(schema, needed - 2)


async def _requests_of(protocol: str) -> tuple[DebateSpec, list[LLMRequest]]:
    """Every request one debate of `protocol` makes with the local provider's defaults, answered
    by a model that fills any schema (so every output type is asked for)."""
    services = build_services(Settings(provider="local"))
    spec = services.policy.spec(QUESTION, protocol=protocol, **PROTOCOLS[protocol])
    filler = SchemaFillingLLM(seed=11)
    await run_debate(spec, resolve_llm=lambda _s: filler, prompts=services.prompts)
    return spec, filler.calls


async def _baseline_requests() -> list[LLMRequest]:
    """The triage, single-review and best-of-n requests, on the local provider's defaults."""
    services = build_services(Settings(provider="local"))
    spec = services.policy.spec(QUESTION)
    filler = SchemaFillingLLM(seed=11)
    await triage(spec, resolve_llm=lambda _s: filler, prompts=services.prompts)
    review, _ = await single_review(spec, resolve_llm=lambda _s: filler, prompts=services.prompts)
    await pick_best(spec, [review, review], resolve_llm=lambda _s: filler, prompts=services.prompts)
    return filler.calls


def _assert_fits(schema: dict[str, Any], max_tokens: int, name: str) -> None:
    fitted = fitted_schema(schema, max_tokens, name)
    worst = worst_case_bytes(fitted)
    assert worst <= max_tokens * (1 - GRAMMAR_MARGIN), f"{name}: {worst} > {max_tokens}"


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_every_output_schema_fits_the_default_local_max_tokens(protocol: str) -> None:
    """The longest reply each output type's grammar allows, counted from the schema, fits the
    role's max_tokens as the local provider's defaults set it; structured's per-debate types
    are also built for the most arguments a side may make (ten ids in all)."""
    spec, requests = await _requests_of(protocol)
    assert requests
    for request in requests:
        assert request.output_schema is not None
        assert request.max_tokens == 1024, "the local model's default max_tokens"
        _assert_fits(request.output_schema, request.max_tokens, request.schema_name or "")
    if protocol == "structured":
        pro = [f"PRO-{n}" for n in range(1, MOST_ARGUMENTS + 1)]
        con = [f"CON-{n}" for n in range(1, MOST_ARGUMENTS + 1)]
        debater = spec.participant_for(Role.DEBATER, "pro").model.max_tokens
        judge = spec.participant_for(Role.JUDGE, "").model.max_tokens
        for side in ("PRO", "CON"):
            _assert_fits(output_schema(opening_type(side)), debater, "Opening")
        _assert_fits(output_schema(cross_type(con)), debater, "CrossExamination")
        _assert_fits(output_schema(side_judgment_type(pro)), judge, "SideJudgment")
        _assert_fits(output_schema(ruling_type(pro + con)), judge, "Ruling")


async def test_the_baselines_fit_the_default_local_max_tokens() -> None:
    requests = await _baseline_requests()
    assert {r.schema_name for r in requests} == {"TriageEstimate", "SingleReview", "PickedReview"}
    for request in requests:
        assert request.output_schema is not None
        _assert_fits(request.output_schema, request.max_tokens, request.schema_name or "")


class CountingLlama:
    """Stands in for llama_cpp.Llama's tokenizer: one token per four bytes."""

    def tokenize(self, text: bytes, add_bos: bool = True) -> list[int]:
        return list(range(len(text) // 4))


def test_a_long_prompt_leaves_the_reply_what_the_context_window_has_left() -> None:
    llm = LlamaSession(LlamaConfig(n_ctx=2048))
    schema = output_schema(ModeratorTurn)

    def request(document_bytes: int) -> LLMRequest:
        return LLMRequest(
            messages=[
                Message(role="system", content="d" * document_bytes),
                Message(role="user", content="Moderate."),
            ],
            model="smollm2-135m-instruct",
            max_tokens=1024,
            output_schema=schema,
        )

    roomy = llm.grammar_for(CountingLlama(), request(400), schema)
    assert roomy == fitted_schema(schema, 1024)
    tight = llm.grammar_for(CountingLlama(), request(4 * 1500), schema)
    assert worst_case_bytes(tight) < worst_case_bytes(roomy)
    assert worst_case_bytes(tight) <= 2048 - 1500
    with pytest.raises(SchemaTooLargeError, match="DEBATEBOT_LOCAL_N_CTX"):
        llm.grammar_for(CountingLlama(), request(4 * 1950), schema)
