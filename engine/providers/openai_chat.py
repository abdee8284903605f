"""OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LiteLLM) through the
official `openai` SDK's Chat Completions.

Why Chat Completions and not the Responses API: OpenAI lists Chat Completions among the
endpoints of its current models (the gpt-6.x, gpt-6.2-* and gpt-5.6-* model pages) and documents
structured outputs there (`response_format` `{"type": "json_schema", "json_schema": {"name",
"schema", "strict": true}}`). What needs the Responses API on some of them is function tools
("gpt-6-astra and gpt-6.1-sol require Responses for tool calling", deployment checklist), and
debatebot sends none. Chat Completions is also what every OpenAI-compatible server speaks.

Structured output differs by server, so the adapter tries a list of modes in order (a
catalogued model's `structured`, else the provider's configured list) and falls back when a
server refuses one:
- `json_schema`: OpenAI's strict structured outputs;
- `json_object_schema`: `{"type": "json_object", "schema": …}`, the only form llama.cpp's server
  accepts (it answers `json_schema` with a validation error); the schema is reduced to what
  llama.cpp's grammar converter handles, as for the local provider;
- `json_object`: JSON mode without a schema (the prompt describes the fields);
- `prompt`: no response format at all.
The mode that worked is remembered per model. Whatever the mode, the caller validates the reply
with pydantic; this adapter only gets the best-constrained text it can.

Every attempt holds a slot of the model's limiter (`engine/providers/limiter.py`) and reports
what the answer said of the key's rate limits: the `x-ratelimit-*` headers OpenAI sends with
every answer, and on a 429 its `retry-after` (`rate_feedback`). Servers that send none (most
OpenAI-compatible ones) leave the limiter only their 429s, overloads and timeouts to go by.

What a request carries (and OpenAI's prompt cache) is `openai_request.py`; what a refusal
means, and the parameter or format the adapter then does without, `openai_refusals.py`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import openai
from openai import AsyncOpenAI

from engine.catalog import ModelEntry, check_effort
from engine.errors import LLMError, StreamRefusedError
from engine.llm import Completion, LLMRequest, TextSink
from engine.models import Usage
from engine.pricing import Pricing
from engine.providers.limiter import Budget, Feedback, ModelLimits, Queued, slot_for
from engine.providers.openai_refusals import (
    ParameterRefused,
    StructuredModeRejected,
    mode_refused,
    refused_parameter,
    stop_sending,
    stream_refused,
)
from engine.providers.openai_request import Learned, chat_params
from engine.providers.openai_stream import Answer, streamed, whole
from engine.providers.retry import (
    RetryPolicy,
    feedback,
    header_count,
    redact,
    status_error,
    timed_attempts,
    timed_out,
    unreachable,
)
from engine.providers.schemas import StructuredMode

log = logging.getLogger("debatebot.providers")

CHAT_MODES = frozenset(
    {
        StructuredMode.JSON_SCHEMA,
        StructuredMode.JSON_OBJECT_SCHEMA,
        StructuredMode.JSON_OBJECT,
        StructuredMode.PROMPT,
    }
)
"""The structured-output modes Chat Completions can be asked for."""


def _warm(client: AsyncOpenAI) -> None:
    """Load now what the SDK and its HTTP stack would import inside the first call (its chat
    resources, anyio's asyncio backend): CPU that otherwise lands on the first turn, and on
    every turn of a panel's first round, which start together."""
    _ = client.chat.completions
    # httpx reaches the backend through anyio when it opens its first connection.
    with contextlib.suppress(ImportError):
        importlib.import_module("anyio._backends._asyncio")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str | None) -> float | None:
    """Seconds in one of OpenAI's reset durations ("6m0s", "1s", "20ms"), else None."""
    if not text:
        return None
    text = text.strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        try:
            return max(0.0, float(text))
        except ValueError:
            return None
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def rate_feedback(headers: Mapping[str, str], *, status: int, tokens: int = 0) -> Feedback:
    """What an answer with `status` and `headers` said of the key's limits, for the limiter;
    `tokens` is what the call was billed, in and out (0 when it was refused).

    OpenAI, rate limits ("rate limits in headers"): `x-ratelimit-limit-requests` /
    `-tokens` ("the maximum number ... permitted before exhausting the rate limit"),
    `x-ratelimit-remaining-requests` / `-tokens` ("the remaining number ... permitted before
    exhausting the rate limit"), `x-ratelimit-reset-requests` / `-tokens` ("the time until the
    rate limit ... resets to its initial state", as "1s", "6m0s"). A 429's wait is its
    `retry-after` (or `retry-after-ms`), as the SDK reads it.
    """
    budgets: list[Budget] = []
    for name, spent in (("requests", 1.0), ("tokens", float(tokens))):
        remaining = header_count(headers.get(f"x-ratelimit-remaining-{name}"))
        if remaining is None:
            continue
        limit = header_count(headers.get(f"x-ratelimit-limit-{name}"))
        budgets.append(
            Budget(
                name=name,
                remaining=remaining,
                limit=limit or None,
                reset_s=parse_duration(headers.get(f"x-ratelimit-reset-{name}")),
                spent=spent,
            )
        )
    return feedback(status, budgets, headers)


class OpenAIChatLLM:
    """Chat completions on OpenAI or any server speaking its API at `base_url`; `prompt_cache`
    says the server is OpenAI's, with its prompt cache (the envelope and `prompt_cache_key`);
    `limits` bounds its calls in flight per model (None: unbounded)."""

    def __init__(
        self,
        *,
        provider: str,
        api_key: str,
        base_url: str | None,
        modes: Sequence[StructuredMode],
        price_of: Callable[[str], Pricing],
        facts_of: Callable[[str], ModelEntry | None],
        timeout_s: float,
        retry: RetryPolicy,
        key_variable: str | None,
        max_tokens_param: str = "max_tokens",
        prompt_cache: bool = False,
        limits: ModelLimits | None = None,
    ) -> None:
        if not modes:
            raise LLMError(f"{provider}: no structured output mode configured")
        self._provider = provider
        self._api_key = api_key
        self.base_url = base_url
        self.modes = list(modes)
        self.price_of = price_of
        self.facts_of = facts_of
        self.retry = retry
        self.key_variable = key_variable
        self.max_tokens_param = max_tokens_param
        self.prompt_cache = prompt_cache
        self.timeout_s = timeout_s
        self.limits = limits
        self._learned: dict[str, Learned] = {}
        # max_retries=0: every attempt goes through `with_retries` and the model's limiter
        # (engine/providers/retry.py says why).
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

    def learned(self, model: str) -> Learned:
        """What the adapter learned about `model` so far (fallbacks taken)."""
        return self._learned.setdefault(model, Learned())

    def modes_of(self, model: str) -> list[StructuredMode]:
        """The structured-output modes for `model`, strictest first: its catalogue entry's, else
        the provider's configured ones."""
        entry = self.facts_of(model)
        if entry is not None:
            listed = [mode for mode in entry.structured if mode in CHAT_MODES]
            if listed:
                return listed
        return self.modes

    def mode_for(self, model: str) -> StructuredMode:
        """The structured-output mode currently used for `model` (after any fallback)."""
        return self.modes_of(model)[self.learned(model).mode]

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._ask(request, None)

    def streams(self, request: LLMRequest) -> bool:
        """Every model streams until its server refuses a streamed request."""
        return not self.learned(request.model).stream_refused

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """`complete`, streamed (`openai_stream` says by which rules). A server that refuses
        to stream is not asked to again for the model: the StreamRefusedError sends the
        engine to `complete`."""
        try:
            return await self._ask(request, on_text)
        except StreamRefusedError:
            self.learned(request.model).stream_refused = True
            raise

    async def _ask(self, request: LLMRequest, on_text: TextSink | None) -> Completion:
        pricing = self.price_of(request.model)
        entry = self.facts_of(request.model)
        check_effort(entry, request.effort)
        modes = self.modes_of(request.model)
        learned = self.learned(request.model)
        while True:
            index = learned.mode
            mode = modes[index] if request.output_schema is not None else None
            try:
                return await self._complete_with(request, mode, entry, learned, pricing, on_text)
            except ParameterRefused as refused:
                if not refused.sent:
                    raise
                stop_sending(learned, refused, what=f"{self.provider} model {request.model}")
            except StructuredModeRejected as refused:
                if index + 1 >= len(modes):
                    raise LLMError(
                        f"{refused} It was the last structured output mode configured"
                        f" ({', '.join(modes)}); add `json_object` or `prompt` to the modes"
                        " of this provider"
                    ) from refused
                if learned.mode == index:
                    # Concurrent calls may all be refused; the first one switches and says so.
                    learned.mode = index + 1
                    log.warning(
                        "%s model %s refused structured output mode %s; falling back to %s",
                        self.provider,
                        request.model,
                        modes[index].value,
                        modes[index + 1].value,
                    )

    async def _complete_with(
        self,
        request: LLMRequest,
        mode: StructuredMode | None,
        entry: ModelEntry | None,
        learned: Learned,
        pricing: Pricing,
        on_text: TextSink | None,
    ) -> Completion:
        kwargs, enveloped = chat_params(
            request,
            mode,
            entry,
            learned,
            tokens_field=self.max_tokens_param,
            prompt_cache=self.prompt_cache,
        )
        if on_text is not None:
            # OpenAI: `stream_options` "only set this when you set `stream: true`"; with
            # `include_usage` the usage comes in a last chunk (`openai_stream`).
            kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        answer, latency = await timed_attempts(
            lambda queued: self._create(kwargs, request.model, mode, queued, on_text),
            policy=self.retry,
            what=f"{self.provider} model {request.model}",
        )
        refusal = answer.refusal
        if refusal:
            raise LLMError(
                f"{self.provider} model {request.model} refused to answer: {refusal[:300]}."
                " Rephrase the question or use another model for this role"
            )
        counted = usage_of(answer.usage)
        return Completion(
            text=answer.text,
            usage=counted,
            cost_usd=pricing.cost(counted),
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=answer.finish_reason,
            enveloped=enveloped,
        )

    async def _create(
        self,
        kwargs: dict[str, Any],
        model: str,
        mode: StructuredMode | None,
        queued: Queued | None = None,
        on_text: TextSink | None = None,
    ) -> Answer:
        what = f"{self.provider} model {model}"
        async with slot_for(self.limits, model, queued) as slot:
            try:
                # The raw response, for its headers ("Accessing raw response data (e.g.
                # headers)", the SDK's README); `parse()` gives what `create` returns: the
                # completion, or with `stream` the SDK's `AsyncStream` of chunks.
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
                parsed = raw.parse()
                if on_text is None:
                    answer = whole(parsed, what=what)
                else:
                    answer = await streamed(parsed, on_text, what=what)
            except openai.APITimeoutError as error:
                what = f"{self.provider} model {model}"
                raise timed_out(slot, what=what, timeout_s=self.timeout_s) from error
            except openai.APIConnectionError as error:
                raise unreachable(
                    error, provider=self.provider, base_url=self.base_url, api_key=self._api_key
                ) from error
            except openai.APIStatusError as error:
                slot.report(rate_feedback(error.response.headers, status=error.status_code))
                raise self._refusal(error, kwargs, model, mode) from error
            except openai.APIError as error:
                # An SSE `error` event in the middle of a stream: the reply is asked again.
                raise LLMError(
                    f"{what}: the stream ended with an error"
                    f" ({redact(error.message, self._api_key)[:300]}); asking again",
                    retryable=True,
                ) from error
            usage = answer.usage
            billed = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0) if usage else 0
            slot.report(rate_feedback(raw.headers, status=raw.status_code, tokens=billed))
            return answer

    def _refusal(
        self,
        error: openai.APIStatusError,
        kwargs: dict[str, Any],
        model: str,
        mode: StructuredMode | None,
    ) -> LLMError:
        """The engine error for an error status: a parameter to stop sending, a response
        format to fall back from, or `status_error`'s."""
        message = redact(error.message, self._api_key)
        status = error.status_code
        plain = status_error(
            provider=self.provider,
            model=model,
            status=status,
            message=message,
            headers=error.response.headers,
            key_variable=self.key_variable,
        )
        if kwargs.get("stream") and stream_refused(status, error.param, message):
            return StreamRefusedError(
                f"{self.provider} model {model} refused a streamed request (HTTP {status}:"
                f" {message[:300]}); it is asked whole from now on"
            )
        param = refused_parameter(status, error.param, error.code, message)
        if param is not None:
            return ParameterRefused(
                str(plain),
                param=param,
                sent=param in kwargs,
                detail=f"HTTP {status} {error.code or 'without a code'}: {message[:300]}",
            )
        if (
            mode is not None
            and mode is not StructuredMode.PROMPT
            and mode_refused(status, error.param, message)
        ):
            return StructuredModeRejected(
                f"{self.provider} model {model} refused response format {mode.value}"
                f" (HTTP {status}: {message[:300]})."
            )
        return plain


def usage_of(usage: Any) -> Usage:
    """Chat Completions usage as debatebot counts it. `prompt_tokens` includes the tokens read
    from the cache (`prompt_tokens_details.cached_tokens`) and those written to it
    (`cache_write_tokens`, billed at the cache-write rate on gpt-5.6 and later);
    `completion_tokens` includes the reasoning (`completion_tokens_details.reasoning_tokens`)."""
    if usage is None:
        return Usage()
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    cached = (getattr(prompt, "cached_tokens", None) or 0) if prompt else 0
    written = (getattr(prompt, "cache_write_tokens", None) or 0) if prompt else 0
    reasoning = (getattr(completion, "reasoning_tokens", None) or 0) if completion else 0
    input_tokens = usage.prompt_tokens or 0
    output_tokens = usage.completion_tokens or 0
    cached = min(cached, input_tokens)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_input_tokens=cached,
        # Never more than the rest of the prompt, so no split can price below zero.
        cache_write_input_tokens=min(written, input_tokens - cached),
        reasoning_tokens=min(reasoning, output_tokens),
    )
