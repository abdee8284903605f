"""The Chat Completions arguments of a request: its messages, output limit, effort and
temperature as its model takes them, its response format, and OpenAI's prompt-cache key.

What a request carries depends on the model, as its catalogue entry (`facts_of`) says:
- the output limit is `max_completion_tokens` for OpenAI (`max_tokens` "is now deprecated in
  favor of `max_completion_tokens`, and is not compatible with o-series models", SDK docs) and
  `max_tokens` for OpenAI-compatible servers, which all read it;
- `reasoning_effort` is the role's effort, when the role sets one the model lists; an effort a
  listed model does not take is refused before any request (`check_effort`);
- `temperature` only where the model takes it: "When reasoning effort is not none, remove
  `temperature`, `top_p`, and `top_logprobs`" (deployment checklist), so a reasoning model gets
  one only with effort `none`, and only if it offers `none`.
A model the catalogue does not know gets the role's settings as they are. When a server refuses
one of them with its 400 (`param` `temperature`, `max_tokens` or `reasoning_effort`), the
adapter stops sending it to that model (or sends `max_completion_tokens`), retries at once, and
remembers it for the process.

Prompt caching (OpenAI itself, `prompt_cache=True`): "The structured output schema serves as a
prefix to the system message" and cache hits need an "exact prefix match" (prompt-caching
guide), so in `json_schema` mode a request that carries the debate's envelope sends it instead
of the role's schema: every call of a debate then starts with the same schema and the same
preamble. The call's key is named after its instructions, at the end of the last message. Every
request also sends a `prompt_cache_key`, the same for all calls sharing the preamble ("Use
`prompt_cache_key` consistently for requests that share a prefix"), so they are routed to the
same cache. OpenAI-compatible servers get neither: their prefix caches (vLLM's, llama.cpp's)
match prompt tokens, which a response format is not part of, so the role's own schema costs
them no cache hit, and a small model given a schema of every role's answer can fill the wrong
one; nor do they all take `prompt_cache_key`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import ModelEntry
from engine.envelope import Envelope
from engine.llm import LLMRequest
from engine.providers.grammar import grammar_schema
from engine.providers.schemas import StructuredMode, strict_schema

_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def response_format(
    mode: StructuredMode, request: LLMRequest, envelope: Envelope | None = None
) -> dict[str, Any] | None:
    """The `response_format` parameter of `mode` for a request with an output schema (the
    `envelope`'s schema instead, when given, in `json_schema` mode)."""
    schema = request.output_schema
    assert schema is not None
    if mode is StructuredMode.JSON_SCHEMA:
        named = request.schema_name or "output"
        if envelope is not None:
            named, schema = envelope.name, envelope.json_schema
        # The name must match ^[a-zA-Z0-9_-]{1,64}$ (the SDK's ResponseFormatJSONSchema).
        name = _SCHEMA_NAME.sub("_", named)[:64] or "output"
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True},
        }
    if mode is StructuredMode.JSON_OBJECT_SCHEMA:
        # llama.cpp turns this schema into a grammar, with the converter's limits: long string
        # bounds make it fail (and have crashed llama-cpp-python's server), so use the subset
        # the local provider sends to the same converter.
        return {"type": "json_object", "schema": grammar_schema(schema)}
    if mode is StructuredMode.JSON_OBJECT:
        return {"type": "json_object"}
    return None


@dataclass
class Learned:
    """What servers taught the adapter about one model, kept for the process."""

    mode: int = 0
    """The index of the structured-output mode in use."""
    refused: set[str] = field(default_factory=set)
    """The request parameters the server refused for this model
    (`engine.providers.openai_refusals`): none is sent again (`max_tokens` becomes
    `max_completion_tokens`)."""
    stream_refused: bool = False
    """The server refused `stream` (or its `stream_options`): the model is asked whole."""


def sampling_params(
    request: LLMRequest, entry: ModelEntry | None, learned: Learned, *, tokens_field: str
) -> dict[str, Any]:
    """The output limit, effort and temperature of `request` as its model takes them."""
    limit_param = "max_completion_tokens" if "max_tokens" in learned.refused else tokens_field
    params: dict[str, Any] = {limit_param: request.max_tokens}
    effort = request.effort
    if effort is not None and "reasoning_effort" not in learned.refused:
        # `check_effort` refused a level a catalogued model does not list, before any request.
        params["reasoning_effort"] = effort
    else:
        effort = None
    if "temperature" in learned.refused:
        return params
    if entry is None or entry.temperature:
        params["temperature"] = request.temperature
    elif effort == "none" and "none" in entry.efforts:
        # "When reasoning effort is not none, remove `temperature`, `top_p`, and
        # `top_logprobs`" (OpenAI's deployment checklist): with `none`, a model that offers it
        # samples at the role's temperature.
        params["temperature"] = request.temperature
    return params


def prompt_cache_key(request: LLMRequest) -> str | None:
    """The `prompt_cache_key` of `request`: a hash of its stable prefix (the preamble of rules
    and case), the same for every call of a debate; None without one."""
    stable = request.messages[: request.stable_prefix_messages]
    if not stable:
        return None
    digest = hashlib.sha256("\x1e".join(m.content for m in stable).encode("utf-8"))
    return f"debatebot-{digest.hexdigest()[:32]}"


def chat_params(
    request: LLMRequest,
    mode: StructuredMode | None,
    entry: ModelEntry | None,
    learned: Learned,
    *,
    tokens_field: str,
    prompt_cache: bool,
) -> tuple[dict[str, Any], bool]:
    """The Chat Completions arguments of `request` in `mode`, and whether they carry its
    envelope (the answer is then under the envelope's key)."""
    envelope = request.envelope if prompt_cache and mode is StructuredMode.JSON_SCHEMA else None
    messages = [m.model_dump() for m in request.messages]
    if envelope is not None:
        # After the role's own instructions: the part of the prompt no other call shares.
        last = messages[-1]
        text = f"{last['content'].rstrip()}\n\n{envelope.instruction()}"
        messages[-1] = {**last, "content": text}
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        **sampling_params(request, entry, learned, tokens_field=tokens_field),
    }
    if mode is not None:
        format_ = response_format(mode, request, envelope)
        if format_ is not None:
            kwargs["response_format"] = format_
    key = prompt_cache_key(request) if prompt_cache else None
    if key is not None:
        kwargs["prompt_cache_key"] = key
    return kwargs, envelope is not None
