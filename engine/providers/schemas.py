"""JSON-schema adjustments for what each structured-output feature accepts.

OpenAI's strict mode (`json_schema` with `strict: true`) refuses length and size keywords.
Anthropic's structured outputs refuse numeric and length bounds and most item counts.
Anthropic's tool input schemas accept them, but gateways that put a llama.cpp server behind the
Messages API turn long upper bounds into grammars too large to build (and have crashed the
server). What is sent drops those keywords; pydantic still enforces every bound on the reply.
"""

from __future__ import annotations

import json
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


OUTPUT_FORMAT_UNSUPPORTED = frozenset(
    {
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "maxItems",
        "default",
    }
)
"""Keywords Anthropic's structured outputs refuse with a 400 (Anthropic, structured-outputs: no
`minimum`/`maximum`/`minLength`/`maxLength`, no array bounds beyond `minItems` 0 or 1)."""
HINT = "must also satisfy "
"""How a dropped bound is told to the model: appended to the field's description as JSON."""


def output_format_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as Anthropic's `output_config.format` accepts it.

    Anthropic, structured-outputs: "every object needs `additionalProperties: false`", no
    `minimum`/`maximum`/`minLength`/`maxLength`, `minItems` only 0 or 1, or the request is a
    400. A larger `minItems` becomes 1 (an empty list stays refused). What is dropped is
    appended to the node's description (`must also satisfy {"minItems": 3}`), so the model can
    still follow it; pydantic validates the reply against the whole schema.
    """
    node: dict[str, Any] = {}
    dropped: dict[str, Any] = {}
    for key, value in schema.items():
        if key in OUTPUT_FORMAT_UNSUPPORTED:
            if key != "default":
                dropped[key] = value
        elif key == "minItems" and isinstance(value, int) and value > 1:
            dropped[key] = value
            node[key] = 1
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            node[key] = {name: output_format_schema(sub) for name, sub in value.items()}
        elif key in ("items", "not", "additionalProperties") and isinstance(value, dict):
            node[key] = output_format_schema(value)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            node[key] = [output_format_schema(sub) for sub in value]
        else:
            node[key] = value
    if node.get("type") == "object" or "properties" in node:
        node["additionalProperties"] = False
    if dropped:
        hint = HINT + json.dumps(dropped, sort_keys=True)
        described = node.get("description")
        node["description"] = f"{described} ({hint})" if described else f"({hint})"
    return node
