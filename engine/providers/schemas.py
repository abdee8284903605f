"""JSON-schema adjustments for what each structured-output feature accepts.

OpenAI's strict mode (`json_schema` with `strict: true`) refuses length and size keywords.
Anthropic's tool input schemas accept them, but gateways that put a llama.cpp server behind the
Messages API turn long upper bounds into grammars too large to build (and have crashed the
server). What is sent drops those keywords; pydantic still enforces every bound on the reply.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Any


class StructuredMode(StrEnum):
    """How a model is asked for JSON, strictest first (here, not beside the adapters, so
    settings and the model catalogue can name modes without importing an SDK)."""

    JSON_SCHEMA = "json_schema"
    """OpenAI's `response_format` `json_schema` with `strict: true`."""
    JSON_OBJECT_SCHEMA = "json_object_schema"
    JSON_OBJECT = "json_object"
    OUTPUT_FORMAT = "output_format"
    """Anthropic's structured outputs: `output_config.format` of type `json_schema`."""
    TOOL = "tool"
    """Anthropic's forced tool call (`tool_choice` naming the tool), for models before
    structured outputs; Claude Opus 5.5 and Sonnet 5.5 refuse it."""
    PROMPT = "prompt"


STRICT_UNSUPPORTED = frozenset({"minLength", "maxLength", "minItems", "maxItems", "default"})
UPPER_BOUNDS = frozenset({"maxLength", "maxItems", "default"})


def without_keywords(schema: Any, keywords: Collection[str]) -> Any:
    """`schema` with `keywords` removed at every level."""
    if isinstance(schema, list):
        return [without_keywords(item, keywords) for item in schema]
    if isinstance(schema, dict):
        return {k: without_keywords(v, keywords) for k, v in schema.items() if k not in keywords}
    return schema


def strict_schema(schema: Any) -> Any:
    """`schema` as OpenAI's strict structured outputs accept it."""
    return without_keywords(schema, STRICT_UNSUPPORTED)


def tool_input_schema(schema: Any) -> Any:
    """`schema` as a tool input schema: lower bounds kept (they stop empty answers), upper bounds
    left to validation."""
    return without_keywords(schema, UPPER_BOUNDS)
