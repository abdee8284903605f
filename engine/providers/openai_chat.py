"""OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LiteLLM) through the
official `openai` SDK's Chat Completions.

Why Chat Completions and not the Responses API: OpenAI lists Chat Completions among the
endpoints of its current models (the gpt-6.x, gpt-6.2-* and gpt-5.6-* model pages) and documents
structured outputs there (`response_format` `{"type": "json_schema", "json_schema": {"name",
"schema", "strict": true}}`). What needs the Responses API on some of them is function tools
("gpt-6-astra and gpt-6.1-sol require Responses for tool calling", deployment checklist), and
debatebot sends none. Chat Completions is also what every OpenAI-compatible server speaks.

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

Every attempt holds a slot of the model's limiter (`engine/providers/limiter.py`) and reports
what the answer said of the key's rate limits: the `x-ratelimit-*` headers OpenAI sends with
every answer, and on a 429 its `retry-after` (`rate_feedback`). Servers that send none (most
OpenAI-compatible ones) leave the limiter only their 429s, overloads and timeouts to go by.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai import AsyncOpenAI

from engine.catalog import ModelEntry, check_effort
from engine.envelope import Envelope
from engine.errors import LLMError
from engine.llm import Completion, LLMRequest
from engine.models import Usage
from engine.pricing import Pricing
from engine.providers.grammar import grammar_schema
from engine.providers.limiter import Budget, Feedback, ModelLimits, Outcome, Queued, slot_for
from engine.providers.retry import (
    RetryPolicy,
    capacity_outcome,
    header_count,
    parse_retry_after,
    redact,
    status_error,
    with_retries,
)
from engine.providers.schemas import StructuredMode, strict_schema

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


class StructuredModeRejected(LLMError):
    """The server refused a response format; the adapter falls back to the next mode."""


class ParameterRefused(LLMError):
    """The server refused a request parameter the adapter can do without (`param`); `sent` says
    whether the refused request carried it, `detail` is the server's status, code and message."""

    def __init__(self, message: str, *, param: str, sent: bool, detail: str) -> None:
        super().__init__(message)
        self.param = param
        self.sent = sent
        self.detail = detail


# How servers word a refused response format: OpenAI-style 400s, vLLM/LiteLLM 422s, and
# llama-cpp-python's 500 carrying pydantic's "Input should be 'text' or 'json_object'".
_MODE_REFUSAL = re.compile(
    r"response_format|json_schema|structured output|guided_json|grammar", re.IGNORECASE
)
_MODE_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})
# OpenAI's 400 for a parameter a model does not take names it in `param`, with code
# `unsupported_parameter` ("Unsupported parameter: 'max_tokens' is not supported with this
# model. Use 'max_completion_tokens' instead.") or `unsupported_value` ("Unsupported value:
# 'temperature' does not support 0 with this model. Only the default (1) value is supported.").
_SWITCHABLE = frozenset({"temperature", "max_tokens", "reasoning_effort"})
_UNSUPPORTED_CODES = frozenset({"unsupported_parameter", "unsupported_value"})
# The same refusal seen only in the message (a proxy that drops `param` and `code`).
_UNSUPPORTED_MESSAGE = re.compile(r"Unsupported (?:parameter|value): '(\w+)'")
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def refused_parameter(status: int, param: str | None, code: str | None, message: str) -> str | None:
    """The request parameter a server's error refuses, when it is one the adapter can stop
    sending: by status, `param` and `code` first, by OpenAI's message wording only when the
    body lacks them."""
    if status != 400:
        return None
    # No code is taken as a refusal too: OpenAI's code for an effort level a model lacks is not
    # documented, and its tools-with-effort refusal has none.
    if param in _SWITCHABLE and (code is None or code in _UNSUPPORTED_CODES):
        return param
    if not param and not code:
        found = _UNSUPPORTED_MESSAGE.search(message)
        if found and found.group(1) in _SWITCHABLE:
            return found.group(1)
    return None


def _mode_refused(status: int, param: str | None, message: str) -> bool:
    if status not in _MODE_REFUSAL_STATUSES:
        return False
    return (param or "").startswith("response_format") or bool(_MODE_REFUSAL.search(message))


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
    temperature_refused: bool = False
    max_tokens_refused: bool = False
    effort_refused: bool = False


def sampling_params(
    request: LLMRequest, entry: ModelEntry | None, learned: Learned, *, tokens_field: str
) -> dict[str, Any]:
    """The output limit, effort and temperature of `request` as its model takes them."""
    field = "max_completion_tokens" if learned.max_tokens_refused else tokens_field
    params: dict[str, Any] = {field: request.max_tokens}
    effort = request.effort
    if effort is not None and not learned.effort_refused:
        # `check_effort` refused a level a catalogued model does not list, before any request.
        params["reasoning_effort"] = effort
    else:
        effort = None
    if learned.temperature_refused:
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
    outcome = capacity_outcome(status)
    waits = outcome in (Outcome.LIMITED, Outcome.OVERLOADED)
    return Feedback(
        outcome, tuple(budgets), retry_after_s=parse_retry_after(headers) if waits else None
    )


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
        pricing = self.price_of(request.model)
        entry = self.facts_of(request.model)
        check_effort(entry, request.effort)
        modes = self.modes_of(request.model)
        learned = self.learned(request.model)
        while True:
            index = learned.mode
            mode = modes[index] if request.output_schema is not None else None
            try:
                return await self._complete_with(request, mode, entry, learned, pricing)
            except ParameterRefused as refused:
                if not refused.sent:
                    raise
                self._stop_sending(request.model, learned, refused)
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

    def _stop_sending(self, model: str, learned: Learned, refused: ParameterRefused) -> None:
        """Switch `model` away from the refused parameter, once; a concurrent call that was
        refused the same parameter finds it switched already and just retries."""
        what = f"{self.provider} model {model}"
        if refused.param == "temperature" and not learned.temperature_refused:
            learned.temperature_refused = True
            log.warning(
                "%s refused a temperature (%s); not sending one to it again. A catalogue entry"
                ' with "temperature": false in DEBATEBOT_MODELS_FILE says so from the start',
                what,
                refused.detail,
            )
        elif refused.param == "max_tokens" and not learned.max_tokens_refused:
            learned.max_tokens_refused = True
            log.warning(
                "%s refused max_tokens (%s); sending max_completion_tokens to it from now on",
                what,
                refused.detail,
            )
        elif refused.param == "reasoning_effort" and not learned.effort_refused:
            learned.effort_refused = True
            log.warning(
                "%s refused reasoning_effort (%s); its roles run at the model's default effort"
                " from now on. Remove DEBATEBOT_ROLES__<ROLE>__EFFORT for the roles on this"
                " model, or set a level it takes",
                what,
                refused.detail,
            )

    async def _complete_with(
        self,
        request: LLMRequest,
        mode: StructuredMode | None,
        entry: ModelEntry | None,
        learned: Learned,
        pricing: Pricing,
    ) -> Completion:
        kwargs, enveloped = chat_params(
            request,
            mode,
            entry,
            learned,
            tokens_field=self.max_tokens_param,
            prompt_cache=self.prompt_cache,
        )
        started = time.perf_counter()
        queued = Queued()
        response = await with_retries(
            lambda: self._create(kwargs, request.model, mode, queued),
            policy=self.retry,
            what=f"{self.provider} model {request.model}",
            clock=queued.clock,
        )
        # The model's time: not what the call spent queued behind its limit.
        latency = max(0.0, time.perf_counter() - started - queued.seconds)
        if not response.choices:
            raise LLMError(f"{self.provider} model {request.model} returned no choices")
        choice = response.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            raise LLMError(
                f"{self.provider} model {request.model} refused to answer: {refusal[:300]}."
                " Rephrase the question or use another model for this role"
            )
        counted = usage_of(response.usage)
        return Completion(
            text=choice.message.content or "",
            usage=counted,
            cost_usd=pricing.cost(counted),
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=choice.finish_reason,
            enveloped=enveloped,
        )

    async def _create(
        self,
        kwargs: dict[str, Any],
        model: str,
        mode: StructuredMode | None,
        queued: Queued | None = None,
    ) -> Any:
        async with slot_for(self.limits, model, queued) as slot:
            try:
                # The raw response, for its headers ("Accessing raw response data (e.g.
                # headers)", the SDK's README); `parse()` gives what `create` returns.
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
            except openai.APITimeoutError as error:
                slot.report(Feedback(Outcome.OVERLOADED))
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
                slot.report(rate_feedback(error.response.headers, status=error.status_code))
                raise self._refusal(error, kwargs, model, mode) from error
            response = raw.parse()
            usage = getattr(response, "usage", None)
            billed = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0) if usage else 0
            slot.report(rate_feedback(raw.headers, status=raw.status_code, tokens=billed))
            return response

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
        param = refused_parameter(status, error.param, error.code, message)
        if param is not None:
            plain = status_error(
                provider=self.provider,
                model=model,
                status=status,
                message=message,
                headers=error.response.headers,
                key_variable=self.key_variable,
            )
            return ParameterRefused(
                str(plain),
                param=param,
                sent=param in kwargs,
                detail=f"HTTP {status} {error.code or 'without a code'}: {message[:300]}",
            )
        if (
            mode is not None
            and mode is not StructuredMode.PROMPT
            and _mode_refused(status, error.param, message)
        ):
            return StructuredModeRejected(
                f"{self.provider} model {model} refused response format {mode.value}"
                f" (HTTP {status}: {message[:300]})."
            )
        return status_error(
            provider=self.provider,
            model=model,
            status=status,
            message=message,
            headers=error.response.headers,
            key_variable=self.key_variable,
        )


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
