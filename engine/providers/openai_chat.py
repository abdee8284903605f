"""OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LiteLLM) through the
official `openai` SDK's chat completions.

Structured output differs by server, so the adapter tries a configurable list of modes in order
and falls back when a server rejects one:
- `json_schema`: OpenAI's strict structured outputs;
- `json_object_schema`: `{"type": "json_object", "schema": …}`, the only form llama.cpp's server
  accepts (it answers `json_schema` with a validation error); the schema is reduced to what
  llama.cpp's grammar converter handles, as for the local provider;
- `json_object`: JSON mode without a schema (the prompt describes the fields);
- `prompt`: no response format at all.
The mode that worked is remembered per model. Whatever the mode, the caller validates the reply
with pydantic; this adapter only gets the best-constrained text it can.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import openai
from openai import AsyncOpenAI

from engine.errors import LLMError
from engine.llm import Completion, LLMRequest
from engine.models import Usage
from engine.pricing import Pricing
from engine.providers.local import grammar_schema
from engine.providers.retry import RetryPolicy, redact, status_error, with_retries
from engine.providers.schemas import StructuredMode, strict_schema

log = logging.getLogger("debatebot.providers")


def _warm(client: AsyncOpenAI) -> None:
    """Load now what the SDK and its HTTP stack would import inside the first call (its chat
    resources, anyio's asyncio backend): about 0.1 s of CPU that otherwise lands on the first
    turn, and on every turn of a panel's first round, which start together."""
    _ = client.chat.completions
    # httpx reaches the backend through anyio when it opens its first connection.
    with contextlib.suppress(ImportError):
        importlib.import_module("anyio._backends._asyncio")


class StructuredModeRejected(LLMError):
    """The server refused a response format; the adapter falls back to the next mode."""


# How servers word a refused response format: OpenAI-style 400s, vLLM/LiteLLM 422s, and
# llama-cpp-python's 500 carrying pydantic's "Input should be 'text' or 'json_object'".
_MODE_REFUSAL = re.compile(
    r"response_format|json_schema|structured output|guided_json|grammar", re.IGNORECASE
)
_MODE_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})


def response_format(mode: StructuredMode, request: LLMRequest) -> dict[str, Any] | None:
    """The `response_format` parameter of `mode` for a request with an output schema."""
    schema = request.output_schema
    assert schema is not None
    if mode is StructuredMode.JSON_SCHEMA:
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema_name or "output",
                "schema": strict_schema(schema),
                "strict": True,
            },
        }
    if mode is StructuredMode.JSON_OBJECT_SCHEMA:
        # llama.cpp turns this schema into a grammar, with the converter's limits: long string
        # bounds make it fail (and have crashed llama-cpp-python's server), so use the subset
        # the local provider sends to the same converter.
        return {"type": "json_object", "schema": grammar_schema(schema)}
    if mode is StructuredMode.JSON_OBJECT:
        return {"type": "json_object"}
    return None


class OpenAIChatLLM:
    """Chat completions on OpenAI or any server speaking its API at `base_url`."""

    def __init__(
        self,
        *,
        provider: str,
        api_key: str,
        base_url: str | None,
        modes: Sequence[StructuredMode],
        price_of: Callable[[str], Pricing],
        timeout_s: float,
        retry: RetryPolicy,
        key_variable: str | None,
        max_tokens_param: str = "max_tokens",
    ) -> None:
        if not modes:
            raise LLMError(f"{provider}: no structured output mode configured")
        self._provider = provider
        self._api_key = api_key
        self.base_url = base_url
        self.modes = list(modes)
        self.price_of = price_of
        self.retry = retry
        self.key_variable = key_variable
        self.max_tokens_param = max_tokens_param
        self.timeout_s = timeout_s
        self._mode_for_model: dict[str, int] = {}
        self._client = AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        _warm(self._client)

    async def aclose(self) -> None:
        """Close the SDK client's connections (inside the event loop that used them)."""
        await self._client.close()

    @property
    def provider(self) -> str:
        return self._provider

    def mode_for(self, model: str) -> StructuredMode:
        """The structured-output mode currently used for `model` (after any fallback)."""
        return self.modes[self._mode_for_model.get(model, 0)]

    async def complete(self, request: LLMRequest) -> Completion:
        pricing = self.price_of(request.model)
        if request.output_schema is None:
            return await self._complete_with(request, None, pricing)
        first = self._mode_for_model.get(request.model, 0)
        for index in range(first, len(self.modes)):
            mode = self.modes[index]
            try:
                completion = await self._complete_with(request, mode, pricing)
            except StructuredModeRejected as refused:
                following = self.modes[index + 1] if index + 1 < len(self.modes) else None
                if following is None:
                    raise LLMError(
                        f"{refused} It was the last structured output mode configured"
                        f" ({', '.join(self.modes)}); add `json_object` or `prompt` to the modes"
                        " of this provider"
                    ) from refused
                log.warning(
                    "%s model %s refused structured output mode %s; falling back to %s",
                    self.provider,
                    request.model,
                    mode.value,
                    following.value,
                )
                continue
            self._mode_for_model[request.model] = index
            return completion
        raise AssertionError("unreachable: the loop returns or raises")

    async def _complete_with(
        self, request: LLMRequest, mode: StructuredMode | None, pricing: Pricing
    ) -> Completion:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            self.max_tokens_param: request.max_tokens,
        }
        if mode is not None:
            format_ = response_format(mode, request)
            if format_ is not None:
                kwargs["response_format"] = format_
        started = time.perf_counter()
        response = await with_retries(
            lambda: self._create(kwargs, request.model, mode),
            policy=self.retry,
            what=f"{self.provider} model {request.model}",
        )
        latency = time.perf_counter() - started
        if not response.choices:
            raise LLMError(f"{self.provider} model {request.model} returned no choices")
        choice = response.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            raise LLMError(
                f"{self.provider} model {request.model} refused to answer: {refusal[:300]}."
                " Rephrase the question or use another model for this role"
            )
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        counted = Usage(
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        )
        return Completion(
            text=choice.message.content or "",
            usage=counted,
            cost_usd=pricing.cost(counted),
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=choice.finish_reason,
        )

    async def _create(self, kwargs: dict[str, Any], model: str, mode: StructuredMode | None) -> Any:
        try:
            return await self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as error:
            raise LLMError(
                f"{self.provider} model {model} did not answer within {self.timeout_s:g}s",
                retryable=True,
            ) from error
        except openai.APIConnectionError as error:
            raise LLMError(
                f"cannot reach {self.provider} at {self.base_url or 'the default URL'}:"
                f" {redact(str(error), self._api_key)}",
                retryable=True,
            ) from error
        except openai.APIStatusError as error:
            message = redact(error.message, self._api_key)
            if (
                mode is not None
                and mode is not StructuredMode.PROMPT
                and error.status_code in _MODE_REFUSAL_STATUSES
                and _MODE_REFUSAL.search(message)
            ):
                raise StructuredModeRejected(
                    f"{self.provider} model {model} refused response format {mode.value}"
                    f" (HTTP {error.status_code}: {message[:300]})."
                ) from error
            raise status_error(
                provider=self.provider,
                model=model,
                status=error.status_code,
                message=message,
                headers=error.response.headers,
                key_variable=self.key_variable,
            ) from error
