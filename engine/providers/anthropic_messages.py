"""Anthropic's Messages API through the official `anthropic` SDK.

Structured output is a forced tool call: the pydantic model's JSON schema is the tool's input
schema and `tool_choice` names the tool, so the reply is the tool's input object. Prompt caching
marks the end of the request's stable prefix (system prompt, question, context) with
`cache_control`, so later turns of the debate read it from the cache; cache reads and writes are
counted apart because they are billed apart.

The role's temperature is not sent: current Claude models reject sampling parameters
("`temperature` is deprecated for this model") and the SDK no longer accepts it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from engine.errors import LLMError
from engine.llm import Completion, LLMRequest
from engine.models import Usage
from engine.pricing import Pricing
from engine.providers.retry import RetryPolicy, redact, status_error, with_retries
from engine.providers.schemas import tool_input_schema

EPHEMERAL = {"type": "ephemeral"}
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(request: LLMRequest) -> str:
    """A valid tool name (`^[a-zA-Z0-9_-]{1,64}$`) for the request's schema."""
    return _TOOL_NAME.sub("_", request.schema_name or "answer")[:64] or "answer"


def _block(text: str, *, cached: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = EPHEMERAL
    return block


def build_params(request: LLMRequest, *, prompt_caching: bool) -> dict[str, Any]:
    """The Messages API parameters of `request`.

    System messages go to `system`; the last message of the stable prefix carries
    `cache_control`, which caches everything up to it (tools, system, leading messages).
    """
    stable = request.stable_prefix_messages if prompt_caching else 0
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for index, message in enumerate(request.messages):
        cached = index == stable - 1
        if message.role == "system":
            system.append(_block(message.content, cached=cached))
        elif cached:
            messages.append(
                {"role": message.role, "content": [_block(message.content, cached=True)]}
            )
        else:
            messages.append({"role": message.role, "content": message.content})
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages or [{"role": "user", "content": "Begin."}],
    }
    if system:
        plain = not any("cache_control" in block for block in system)
        params["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    if request.output_schema is not None:
        name = tool_name(request)
        params["tools"] = [
            {
                "name": name,
                "description": "Give your answer as this tool's input; nothing else is read.",
                "input_schema": tool_input_schema(request.output_schema),
            }
        ]
        params["tool_choice"] = {"type": "tool", "name": name}
    return params


def reply_text(response: Any, request: LLMRequest) -> str:
    """The forced tool's input as JSON, or the text blocks when the model produced no tool call
    (cut off at max_tokens, say), which the caller's validation then rejects and re-asks."""
    if request.output_schema is not None:
        name = tool_name(request)
        for block in response.content:
            if getattr(block, "type", None) == "tool_use" and block.name == name:
                return json.dumps(block.input)
    return "".join(getattr(block, "text", "") for block in response.content if block.type == "text")


class AnthropicLLM:
    """Claude models over the Messages API (or a server speaking it at `base_url`)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        price_of: Callable[[str], Pricing],
        timeout_s: float,
        retry: RetryPolicy,
        prompt_caching: bool = True,
        key_variable: str | None = "DEBATEBOT_ANTHROPIC_API_KEY",
    ) -> None:
        self._api_key = api_key
        self.base_url = base_url
        self.price_of = price_of
        self.timeout_s = timeout_s
        self.retry = retry
        self.prompt_caching = prompt_caching
        self.key_variable = key_variable
        self._client = AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        """Close the SDK client's connections (inside the event loop that used them)."""
        await self._client.close()

    @property
    def provider(self) -> str:
        return "anthropic"

    async def complete(self, request: LLMRequest) -> Completion:
        pricing = self.price_of(request.model)
        params = build_params(request, prompt_caching=self.prompt_caching)
        started = time.perf_counter()
        response = await with_retries(
            lambda: self._create(params, request.model),
            policy=self.retry,
            what=f"anthropic model {request.model}",
        )
        latency = time.perf_counter() - started
        usage = response.usage
        cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
        cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
        counted = Usage(
            input_tokens=usage.input_tokens + cache_read + cache_write,
            output_tokens=usage.output_tokens,
            cached_input_tokens=cache_read,
            cache_write_input_tokens=cache_write,
        )
        if response.stop_reason == "refusal":
            raise LLMError(
                f"anthropic model {request.model} refused to answer. Rephrase the question or"
                " use another model for this role"
            )
        return Completion(
            text=reply_text(response, request),
            usage=counted,
            cost_usd=pricing.cost(counted),
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=response.stop_reason,
        )

    async def _create(self, params: dict[str, Any], model: str) -> Any:
        try:
            return await self._client.messages.create(**params)
        except anthropic.APITimeoutError as error:
            raise LLMError(
                f"anthropic model {model} did not answer within {self.timeout_s:g}s",
                retryable=True,
            ) from error
        except anthropic.APIConnectionError as error:
            raise LLMError(
                f"cannot reach anthropic at {self.base_url or 'the default URL'}:"
                f" {redact(str(error), self._api_key)}",
                retryable=True,
            ) from error
        except anthropic.APIStatusError as error:
            raise status_error(
                provider="anthropic",
                model=model,
                status=error.status_code,
                message=redact(error.message, self._api_key),
                headers=error.response.headers,
                key_variable=self.key_variable,
            ) from error
