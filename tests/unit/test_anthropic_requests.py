"""Anthropic requests without the network: the shape of each structured mode, the schema
structured outputs accept, thinking and effort per catalogue entry, reading replies that begin
with thinking, and telling a refused part of a request from any other 400."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from bot.providers import ProviderRegistry, effort_setting
from bot.settings import Settings
from engine.catalog import Catalog
from engine.errors import LLMError
from engine.llm import LLMRequest, Message, output_schema
from engine.models import ModelSettings, ModeratorTurn
from engine.pricing import FREE
from engine.protocols.panel import revision_type
from engine.protocols.structured import opening_type
from engine.providers.anthropic_messages import (
    AnthropicLLM,
    Part,
    Shape,
    build_params,
    check_effort,
    refused_part,
    reply_text,
)
from engine.providers.retry import RetryPolicy
from engine.providers.schemas import (
    OUTPUT_FORMAT_UNSUPPORTED,
    StructuredMode,
    output_format_schema,
    tool_input_schema,
)

CATALOG = Catalog.load()
SCHEMA = {
    "type": "object",
    "properties": {
        "thesis": {"type": "string", "minLength": 1, "maxLength": 2000},
        "points": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 6},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["thesis", "points", "score"],
    "additionalProperties": False,
}
# Documented messages (MODEL_FACTS §1.3, §4.1).
FORCED_TOOL = 'tool_choice: type "tool" and "any" are not supported for this model.'
DISABLED = (
    '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive"'
    ' and "output_config.effort" to control thinking behavior.'
)


def request(stable: int = 1, effort: Any = None) -> LLMRequest:
    return LLMRequest(
        model="claude-opus-5-5",
        messages=[
            Message(role="system", content="preamble with question and context"),
            Message(role="user", content="role prompt"),
        ],
        output_schema=SCHEMA,
        schema_name="Proposer Turn!",
        stable_prefix_messages=stable,
        effort=effort,
    )


def walk(node: Any) -> list[dict[str, Any]]:
    """Every schema node under `node` (property maps are not nodes)."""
    if isinstance(node, list):
        return [found for item in node for found in walk(item)]
    if not isinstance(node, dict):
        return []
    found = [node]
    for key, value in node.items():
        if key == "properties":
            found += [n for sub in value.values() for n in walk(sub)]
        elif key in ("items", "anyOf", "allOf", "oneOf"):
            found += walk(value)
    return found


def test_structured_outputs_shape_thinks_adaptively_and_caches_the_system_blocks() -> None:
    shape = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort="high")
    params = build_params(request(), shape, prompt_caching=True)
    assert params["output_config"] == {
        "format": {"type": "json_schema", "schema": output_format_schema(SCHEMA)},
        "effort": "high",
    }
    assert params["thinking"] == {"type": "adaptive"}
    assert params["system"] == [
        {
            "type": "text",
            "text": "preamble with question and context",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert params["messages"] == [{"role": "user", "content": "role prompt"}]
    assert not {"tools", "tool_choice", "temperature", "top_p", "top_k"} & params.keys()


def test_an_older_model_gets_the_forced_tool_and_nothing_about_thinking() -> None:
    shape = Shape(mode=StructuredMode.TOOL, thinking=False, effort=None)
    params = build_params(request(), shape, prompt_caching=True)
    assert params["tool_choice"] == {"type": "tool", "name": "Proposer_Turn_"}
    assert params["tools"][0]["input_schema"] == tool_input_schema(SCHEMA)
    assert not {"thinking", "output_config"} & params.keys()
    prompt = build_params(request(), Shape(StructuredMode.PROMPT, False, None), prompt_caching=True)
    assert not {"thinking", "output_config", "tools", "tool_choice"} & prompt.keys()


def test_the_cache_mark_moves_to_the_last_stable_message() -> None:
    shape = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort=None)
    params = build_params(request(stable=2), shape, prompt_caching=True)
    assert params["system"] == "preamble with question and context"
    assert params["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "effort" not in params["output_config"]
    plain = build_params(request(), shape, prompt_caching=False)
    assert "cache_control" not in json.dumps(plain)


@pytest.mark.parametrize(
    "schema",
    [
        output_schema(ModeratorTurn),
        output_schema(opening_type("PRO")),
        output_schema(revision_type(["architect", "security", "operator"])),
        SCHEMA,
    ],
    ids=["ModeratorTurn", "Opening", "PanelRevision", "bounds"],
)
def test_the_output_format_schema_keeps_only_what_structured_outputs_accept(
    schema: dict[str, Any],
) -> None:
    before = json.loads(json.dumps(schema))
    reduced = output_format_schema(schema)
    assert schema == before, "the shared schema was changed"
    for node in walk(reduced):
        assert not OUTPUT_FORMAT_UNSUPPORTED & node.keys(), node
        assert node.get("minItems", 0) in (0, 1), node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False


def test_dropped_bounds_are_told_in_the_description_and_field_names_are_kept() -> None:
    reduced = output_format_schema(SCHEMA)
    points = reduced["properties"]["points"]
    assert points["minItems"] == 1, "at least one item is still enforced"
    assert points["description"] == '(must also satisfy {"maxItems": 6, "minItems": 3})'
    score = reduced["properties"]["score"]
    assert score == {
        "type": "integer",
        "description": '(must also satisfy {"maximum": 10, "minimum": 1})',
    }
    # A field merely named like a keyword is a field, not a bound.
    named = {"type": "object", "properties": {"minimum": {"type": "integer"}}}
    assert output_format_schema(named)["properties"] == {"minimum": {"type": "integer"}}


def test_refusals_are_told_apart_by_status_and_type_before_the_message() -> None:
    tool = Shape(mode=StructuredMode.TOOL, thinking=True, effort="high")
    fmt = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort="high")
    plain = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=False, effort=None)

    def part(
        message: str, shape: Shape, status: int = 400, kind: str = "invalid_request_error"
    ) -> Part | None:
        return refused_part(status=status, error_type=kind, message=message, shape=shape)

    assert part(FORCED_TOOL, tool) is Part.MODE
    assert part("Thinking may not be enabled when tool_choice forces tool use.", tool) is Part.MODE
    assert part("adaptive thinking is not supported on this model", fmt) is Part.THINKING
    assert part("output_config.effort: effort is not supported on this model.", fmt) is Part.EFFORT
    assert part("output_config.format: structured outputs are not supported", fmt) is Part.MODE
    # What was not sent cannot have been refused.
    assert part(DISABLED, plain) is None
    assert part("output_config.effort: effort is not supported", plain) is None
    assert part(FORCED_TOOL, fmt) is None
    # Other statuses and error types keep the ordinary handling.
    assert part(FORCED_TOOL, tool, status=500, kind="api_error") is None
    assert part(FORCED_TOOL, tool, kind="permission_error") is None
    assert part("messages: Field required", fmt) is None


def test_replies_are_read_by_block_type_past_thinking() -> None:
    thinking = SimpleNamespace(type="thinking", thinking="", signature="sig")
    redacted = SimpleNamespace(type="redacted_thinking", data="opaque")
    text = SimpleNamespace(type="text", text='{"thesis": "x"}')
    tool = SimpleNamespace(type="tool_use", name="Proposer_Turn_", input={"thesis": "y"})
    response = SimpleNamespace(content=[thinking, redacted, text])
    assert reply_text(response, request(), StructuredMode.OUTPUT_FORMAT) == '{"thesis": "x"}'
    assert reply_text(response, request(), StructuredMode.PROMPT) == '{"thesis": "x"}'
    with_tool = SimpleNamespace(content=[thinking, tool])
    assert reply_text(with_tool, request(), StructuredMode.TOOL) == '{"thesis": "y"}'
    assert reply_text(SimpleNamespace(content=[thinking]), request(), None) == ""


def llm() -> AnthropicLLM:
    return AnthropicLLM(
        api_key="sk-ant-unit",
        base_url="http://127.0.0.1:9",
        price_of=lambda _model: FREE,
        facts_of=lambda model: CATALOG.find("anthropic", model),
        timeout_s=1.0,
        retry=RetryPolicy(max_attempts=1),
    )


@pytest.mark.parametrize(
    ("model", "mode", "thinking", "effort"),
    [
        ("claude-opus-5-5", StructuredMode.OUTPUT_FORMAT, True, "max"),
        ("claude-haiku-4-5", StructuredMode.TOOL, False, None),
        ("claude-opus-4-6", StructuredMode.OUTPUT_FORMAT, False, "max"),
        ("claude-via-some-gateway", StructuredMode.OUTPUT_FORMAT, False, "max"),
    ],
)
def test_the_shape_follows_the_catalogue_entry(
    model: str, mode: StructuredMode, thinking: bool, effort: str | None
) -> None:
    """Always-thinking models think adaptively; optional thinking stays off; a model the
    catalogue does not know starts with structured outputs, no thinking and the role's effort."""
    entry = CATALOG.find("anthropic", model)
    asked = request(effort="max" if entry is None or entry.efforts else None)
    shape = llm().shape_for(asked.model_copy(update={"model": model}))
    assert shape == Shape(mode=mode, thinking=thinking, effort=effort)
    no_schema = asked.model_copy(update={"model": model, "output_schema": None})
    assert llm().shape_for(no_schema).mode is None


def test_an_effort_the_model_does_not_take_is_refused_with_the_levels_and_the_setting() -> None:
    haiku = CATALOG.find("anthropic", "claude-haiku-4-5")
    opus = CATALOG.find("anthropic", "claude-opus-4-5")
    check_effort(None, "claude-via-some-gateway", "xhigh")
    check_effort(opus, "claude-opus-4-5", None)
    check_effort(opus, "claude-opus-4-5", "high")
    with pytest.raises(LLMError, match=r"takes low, medium, high\. Change DEBATEBOT_ROLES__"):
        check_effort(opus, "claude-opus-4-5", "max")
    with pytest.raises(LLMError, match=r"takes no effort level at all.*unset it"):
        check_effort(haiku, "claude-haiku-4-5", "low", setting="DEBATEBOT_ROLES__JUDGE__EFFORT")
    with pytest.raises(LLMError, match="Anthropic's levels are low, medium, high, xhigh, max"):
        check_effort(None, "claude-via-some-gateway", "minimal")


async def test_the_adapter_refuses_it_before_sending_anything() -> None:
    with pytest.raises(LLMError, match="does not take effort 'max'"):
        await llm().complete(request(effort="max").model_copy(update={"model": "claude-opus-4-5"}))


def test_the_registry_refuses_it_before_a_debate_naming_the_roles_setting() -> None:
    registry = ProviderRegistry(Settings(anthropic_api_key=SecretStr("sk-ant-real-looking-1234")))
    fine = ModelSettings(provider="anthropic", model="claude-opus-5-5", effort="max")
    registry.check({"moderator": fine})
    wrong = ModelSettings(provider="anthropic", model="claude-haiku-4-5", effort="high")
    with pytest.raises(LLMError, match="DEBATEBOT_ROLES__DEBATERS__EFFORT"):
        registry.check({"moderator": fine, "debater": wrong})
    assert effort_setting("synthesizer") == "DEBATEBOT_ROLES__JUDGE__EFFORT"
    assert effort_setting("critic") == "DEBATEBOT_ROLES__CRITIC__EFFORT"
