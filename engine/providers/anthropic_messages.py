"""Anthropic's Messages API through the official `anthropic` SDK.

Structured output takes the modes the model's catalogue entry lists, strictest first:
- `output_format`: structured outputs, `output_config.format` of type `json_schema`, with the
  schema reduced to what the API accepts (`output_format_schema`); the JSON is the reply's
  `text` block;
- `tool`: a forced tool call (`tool_choice` naming the tool), for models before structured
  outputs; the JSON is the tool's input. Claude Opus 5.5, Sonnet 5.5 and Fable 5.1 refuse it;
- `prompt`: neither; the prompt describes the fields.
A model the catalogue does not know tries them in that order. A 400 refusing a mode moves that
model to the next one, and a 400 refusing thinking or an effort drops it for that model; each is
remembered for the process. Whatever the mode, the caller validates the reply with pydantic.

Thinking: a model that always thinks is sent `{"type": "adaptive"}` and the role's effort in
`output_config.effort`; other models get no `thinking` field, which leaves it off. `disabled` is
never sent. The reply's `thinking` blocks are skipped; their tokens are output tokens, counted
as reasoning tokens too.

Prompt caching. "Prompt caching references the entire prompt: `tools`, `system`, and
`messages` (in that order), up to and including the block designated with `cache_control`", and
"changing `output_config.format` invalidates the prompt cache" (Anthropic, prompt-caching and
structured-outputs). So, with caching on:
- a request carrying the debate's envelope sends it, in `output_config.format` or as the one
  forced tool (the same name for every role), instead of the role's schema: every call of the
  debate then has the same tools, format and system. Its keys are optional rather than nullable
  there (Anthropic refuses a schema with more than 16 union-typed parameters); the call's key is
  named after its instructions, at the end of the last message;
- `cache_control` goes on the last block of the stable prefix (the preamble of rules and case),
  which every call shares, and on the end of the debate so far, split into one block per
  section, so a later turn of the round finds the earlier turn's blocks ("the system checks for
  cache hits at content block boundaries", up to 20 blocks back from a breakpoint; two of the
  four breakpoints a request may carry);
- thinking and effort stay what the model's catalogue entry and the role say, the same on every
  call of a role ("changing the thinking mode, the effort value ... invalidates message
  breakpoints"): roles sharing a model share a cache only when they share an effort.
Below a model's minimum cacheable length nothing is cached, without an error. Cache reads and
writes are counted apart because they are billed apart.

Every attempt holds a slot of the model's limiter (`engine/providers/limiter.py`) and reports
what the answer said of the key's rate limits (`anthropic_limits.rate_feedback`): the
`anthropic-ratelimit-*` headers of every answer, and a 429's `retry-after`.

The role's temperature is not sent. The SDK has no `temperature` argument (it was removed in
v1.0), and Anthropic, whats-new-opus-5-5: "Setting `temperature`, `top_p`, or `top_k` to any
non-default value on Claude Opus 4.7 and later models ... returns a 400 error".
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from engine.catalog import ModelEntry, Thinking
from engine.envelope import Envelope
from engine.errors import LLMError, StreamRefusedError
from engine.llm import Completion, LLMRequest, TextSink
from engine.models import Usage
from engine.pricing import Pricing
from engine.providers.anthropic_limits import rate_feedback
from engine.providers.anthropic_stream import refuses_streaming, streamed
from engine.providers.limiter import ModelLimits, Queued, slot_for
from engine.providers.retry import (
    RetryPolicy,
    redact,
    status_error,
    timed_attempts,
    timed_out,
    unreachable,
)
from engine.providers.schemas import StructuredMode, output_format_schema, tool_input_schema

log = logging.getLogger("debatebot.providers")

EPHEMERAL = {"type": "ephemeral"}
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
MODES = (StructuredMode.OUTPUT_FORMAT, StructuredMode.TOOL, StructuredMode.PROMPT)
"""The modes the Messages API offers, strictest first: those of a model the catalogue does not
know (the fallback finds the one it takes)."""
EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The levels `output_config.effort` takes (the SDK's `OutputConfigParam`)."""
EFFORT_SETTING = "DEBATEBOT_ROLES__<ROLE>__EFFORT"


def tool_name(request: LLMRequest, envelope: Envelope | None = None) -> str:
    """A valid tool name (`^[a-zA-Z0-9_-]{1,64}$`) for the request's schema, or its envelope's."""
    name = envelope.name if envelope is not None else request.schema_name or "answer"
    return _TOOL_NAME.sub("_", name)[:64] or "answer"


def sent_envelope(
    request: LLMRequest, mode: StructuredMode | None, *, prompt_caching: bool
) -> Envelope | None:
    """The envelope `request` is sent with in `mode`: the debate's, when it has one and the
    mode sends a schema, with prompt caching on (without it, the role's schema is smaller)."""
    if not prompt_caching or request.output_schema is None:
        return None
    if mode in (StructuredMode.OUTPUT_FORMAT, StructuredMode.TOOL):
        return request.envelope
    return None


def check_effort(
    entry: ModelEntry | None, model: str, effort: str | None, *, setting: str = EFFORT_SETTING
) -> None:
    """Refuse, before any request, an effort `model` does not take: a level the Messages API
    does not have, or one the model's catalogue entry does not list. `setting` is the variable
    to change. A model the catalogue does not know is sent the role's effort as it is."""
    if effort is None:
        return
    if effort not in EFFORTS:
        raise LLMError(
            f"anthropic model {model} cannot take effort {effort!r}: Anthropic's levels are"
            f" {', '.join(EFFORTS)}. Change {setting}"
        )
    # Anthropic, effort: the levels differ per model (`xhigh` only on some of those with
    # `max`); models overview: Haiku 4.5 effort "Not supported". The entry lists them.
    if entry is not None and effort not in entry.efforts:
        accepted = ", ".join(entry.efforts) if entry.efforts else "no effort level at all"
        raise LLMError(
            f"anthropic model {model} does not take effort {effort!r}; it takes {accepted}."
            f" Change {setting}" + ("" if entry.efforts else " to nothing (unset it)")
        )


@dataclass(frozen=True)
class Shape:
    """What a request asks beyond its messages: the structured mode (None without a schema),
    whether it sends adaptive thinking, and the effort it sends."""

    mode: StructuredMode | None
    thinking: bool
    effort: str | None


def _block(text: str, *, cached: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = EPHEMERAL
    return block


def _content(
    text: str, breaks: list[int], marks: list[int], *, cached: bool
) -> str | list[dict[str, Any]]:
    """A message's content: plain text, or text blocks split at `breaks` (the ends of the
    sections later turns repeat), the blocks ending at `marks` marked for the cache."""
    if not breaks or breaks[-1] >= len(text):
        return [_block(text, cached=True)] if cached else text
    ends = [*breaks, len(text)]
    starts = [0, *breaks]
    return [
        _block(text[start:end], cached=end in marks)
        for start, end in zip(starts, ends, strict=True)
        if end > start
    ]


def build_params(request: LLMRequest, shape: Shape, *, prompt_caching: bool) -> dict[str, Any]:
    """The Messages API parameters of `request` in `shape`.

    System messages go to `system`. With prompt caching, the last message of the stable prefix
    carries `cache_control`, which caches everything up to it (Anthropic, prompt-caching:
    "`tools`, `system`, and `messages` (in that order)"), and so do the ends of the debate so
    far the request names (`request.cache_breaks`, by default the last of its
    `shared_breaks`), each only where the request says a call reads it; the request's
    envelope, if any, replaces the role's schema.
    Thinking, effort and the output format are the same on every call of a role, so they do not
    break its cache.
    """
    # A mark only where a later call reads it, or an earlier one wrote it: a write no call reads
    # costs 1.25x the input price for nothing (Anthropic, prompt-caching: "Cache write tokens are
    # 1.25 times the base input tokens price"; `engine/cache_plan.py` decides, the request says).
    stable = request.stable_prefix_messages if prompt_caching and request.cache_preamble else 0
    breaks = request.shared_breaks if prompt_caching else []
    marks = breaks[-1:] if request.cache_breaks is None else request.cache_breaks
    # The debate so far opens the first message after the stable prefix.
    first = request.stable_prefix_messages if prompt_caching else -1
    envelope = sent_envelope(request, shape.mode, prompt_caching=prompt_caching)
    texts = [m.content for m in request.messages]
    if envelope is not None:
        # After the role's own instructions: the part of the prompt no other call shares.
        texts[-1] = f"{texts[-1].rstrip()}\n\n{envelope.instruction(others_left_out=True)}"
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for index, (message, text) in enumerate(zip(request.messages, texts, strict=True)):
        cached = index == stable - 1
        if message.role == "system":
            system.append(_block(text, cached=cached))
            continue
        content = _content(text, breaks if index == first else [], marks, cached=cached)
        messages.append({"role": message.role, "content": content})
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages or [{"role": "user", "content": "Begin."}],
    }
    if system:
        plain = not any("cache_control" in block for block in system)
        params["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    output_config: dict[str, Any] = {}
    source = envelope.json_schema if envelope is not None else request.output_schema

    def sent(schema: dict[str, Any]) -> dict[str, Any]:
        return envelope.with_optional_keys(schema) if envelope is not None else schema

    if shape.mode is StructuredMode.OUTPUT_FORMAT and source is not None:
        output_config["format"] = {
            "type": "json_schema",
            "schema": sent(output_format_schema(source)),
        }
    elif shape.mode is StructuredMode.TOOL and source is not None:
        name = tool_name(request, envelope)
        params["tools"] = [
            {
                "name": name,
                "description": "Give your answer as this tool's input; nothing else is read.",
                "input_schema": sent(tool_input_schema(source)),
            }
        ]
        params["tool_choice"] = {"type": "tool", "name": name}
    if shape.thinking:
        # Anthropic, whats-new-opus-5-5: thinking cannot be disabled; `disabled` or a manual
        # `budget_tokens` is a 400, only `adaptive` is accepted, with `output_config.effort`
        # steering how much.
        params["thinking"] = {"type": "adaptive"}
    if shape.effort is not None:
        output_config["effort"] = shape.effort
    if output_config:
        params["output_config"] = output_config
    return params


def reply_text(
    response: Any,
    request: LLMRequest,
    mode: StructuredMode | None,
    envelope: Envelope | None = None,
) -> str:
    """The answer in `response`: the forced tool's input as JSON, else the `text` blocks (the
    first one for structured outputs). Blocks are picked by type, never by position: Anthropic,
    whats-new-opus-5-5, "every response can begin with one or more `thinking` blocks"; those
    and `redacted_thinking` blocks are skipped. A tool-mode reply without the tool call (cut
    off at max_tokens, say) gives its text, which the caller's validation rejects and re-asks."""
    if mode is StructuredMode.TOOL:
        name = tool_name(request, envelope)
        for block in response.content:
            if getattr(block, "type", None) == "tool_use" and block.name == name:
                return json.dumps(block.input)
    texts = [block.text for block in response.content if getattr(block, "type", None) == "text"]
    if mode is StructuredMode.OUTPUT_FORMAT:
        return texts[0] if texts else ""
    return "".join(texts)


class Part(StrEnum):
    """A part of a request's shape a model can refuse."""

    MODE = "structured output mode"
    THINKING = "thinking"
    EFFORT = "effort"


class ShapeRefused(LLMError):
    """A 400 refusing part of the request (`part`); the adapter drops it for the model."""

    def __init__(self, message: str, *, part: Part) -> None:
        super().__init__(message)
        self.part = part


_FORMAT_WORDS = re.compile(
    r"output_config|output_format|\bformat\b|structured output|json_schema|schema", re.IGNORECASE
)


def refused_part(*, status: int, error_type: str | None, message: str, shape: Shape) -> Part | None:
    """The part of `shape` a refusal is about, or None when it is another error.

    Branches on the status and error type first; the message text is only a best-effort
    classifier (the SDK: its "wording can change, so don't match on it"), and only for a part
    the request did send, so a misread refusal costs one request, never a loop.
    """
    if status != 400 or error_type != "invalid_request_error":
        return None
    lowered = message.lower()
    # Anthropic, whats-new-opus-5-5: forced tool_choice → 400 `tool_choice: type "tool" and
    # "any" are not supported for this model.` Older models with thinking on answer
    # "Thinking may not be enabled when tool_choice forces tool use.": the tool goes first.
    if shape.mode is StructuredMode.TOOL and "tool_choice" in lowered:
        return Part.MODE
    # Anthropic, thinking troubleshooting: extended-only models (the 4.5 generation) answer
    # adaptive thinking with `adaptive thinking is not supported on this model`. The refusals
    # of `enabled`/`disabled` name `output_config.effort` too: about thinking all the same.
    if "thinking" in lowered:
        return Part.THINKING if shape.thinking else None
    if "effort" in lowered:
        return Part.EFFORT if shape.effort is not None else None
    # Anthropic, structured-outputs: a model without them, or a schema feature they lack, is
    # a 400 `invalid_request_error` naming `output_config.format`.
    if shape.mode is StructuredMode.OUTPUT_FORMAT and _FORMAT_WORDS.search(message):
        return Part.MODE
    return None


class AnthropicLLM:
    """Claude models over the Messages API (or a server speaking it at `base_url`);
    `facts_of` gives a model's catalogue entry, None for a model the catalogue does not know;
    `limits` bounds its calls in flight per model (None: unbounded)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        price_of: Callable[[str], Pricing],
        facts_of: Callable[[str], ModelEntry | None],
        timeout_s: float,
        retry: RetryPolicy,
        prompt_caching: bool = True,
        key_variable: str | None = "DEBATEBOT_ANTHROPIC_API_KEY",
        limits: ModelLimits | None = None,
    ) -> None:
        self._api_key = api_key
        self.base_url = base_url
        self.price_of = price_of
        self.facts_of = facts_of
        self.timeout_s = timeout_s
        self.retry = retry
        self.prompt_caching = prompt_caching
        self.key_variable = key_variable
        self.limits = limits
        self._mode_index: dict[str, int] = {}
        self._no_thinking: set[str] = set()
        self._no_effort: set[str] = set()
        self._no_stream: set[str] = set()
        # max_retries=0: every attempt goes through `with_retries` and the model's limiter
        # (engine/providers/retry.py says why).
        self._client = AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        """Close the SDK client's connections (inside the event loop that used them)."""
        await self._client.close()

    @property
    def provider(self) -> str:
        return "anthropic"

    def modes_of(self, model: str) -> Sequence[StructuredMode]:
        """The structured modes `model` is asked in, strictest first."""
        entry = self.facts_of(model)
        return entry.structured if entry is not None else MODES

    def mode_for(self, model: str) -> StructuredMode:
        """The structured mode currently used for `model` (after any fallback)."""
        return self.modes_of(model)[self._mode_index.get(model, 0)]

    def shape_for(self, request: LLMRequest) -> Shape:
        """What `request` is sent with now: the catalogue's facts less what the model refused."""
        model = request.model
        entry = self.facts_of(model)
        # Anthropic, thinking: Opus 5.5, Sonnet 5.5, Haiku 5.5, Fable 5.x think always and take
        # only `adaptive`; on Opus 4.8 and earlier thinking is off by default, so leaving the
        # field out leaves it off (and the 4.5 generation refuses `adaptive`).
        thinks = entry is not None and entry.thinking is Thinking.ALWAYS
        return Shape(
            mode=self.mode_for(model) if request.output_schema is not None else None,
            thinking=thinks and model not in self._no_thinking,
            effort=request.effort if model not in self._no_effort else None,
        )

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._ask(request, None)

    def streams(self, request: LLMRequest) -> bool:
        """Every model streams until a server refuses a streamed request for it."""
        return request.model not in self._no_stream

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """`complete`, streamed (`anthropic_stream` says by which rules); a model whose server
        refused to stream is asked whole from then on."""
        try:
            return await self._ask(request, on_text)
        except StreamRefusedError:
            self._no_stream.add(request.model)
            raise

    async def _ask(self, request: LLMRequest, on_text: TextSink | None) -> Completion:
        pricing = self.price_of(request.model)
        check_effort(self.facts_of(request.model), request.model, request.effort)
        while True:
            shape = self.shape_for(request)
            try:
                return await self._complete_with(request, shape, pricing, on_text)
            except ShapeRefused as refused:
                self._drop(request.model, shape, refused)

    def _drop(self, model: str, shape: Shape, refused: ShapeRefused) -> None:
        """Stop sending what `refused` names to `model`. Idempotent: calls refused together
        (a panel's first round) move the model on once."""
        if refused.part is Part.THINKING:
            self._no_thinking.add(model)
            log.warning("anthropic model %s refused adaptive thinking; not sending it", model)
            return
        if refused.part is Part.EFFORT:
            self._no_effort.add(model)
            log.warning(
                "anthropic model %s refused effort %s; not sending it: unset %s for the roles"
                " using this model",
                model,
                shape.effort,
                EFFORT_SETTING,
            )
            return
        modes = self.modes_of(model)
        index = self._mode_index.get(model, 0)
        if modes[index] is not shape.mode:
            return
        if index + 1 >= len(modes):
            raise LLMError(
                f"{refused} It was the last structured output mode the model catalogue lists"
                f" for it ({', '.join(modes)}); add `prompt` to its `structured` modes in"
                " DEBATEBOT_MODELS_FILE"
            ) from refused
        self._mode_index[model] = index + 1
        log.warning(
            "anthropic model %s refused structured output mode %s; falling back to %s",
            model,
            modes[index].value,
            modes[index + 1].value,
        )

    async def _complete_with(
        self, request: LLMRequest, shape: Shape, pricing: Pricing, on_text: TextSink | None
    ) -> Completion:
        params = build_params(request, shape, prompt_caching=self.prompt_caching)
        response, latency = await timed_attempts(
            lambda queued: self._create(params, request.model, shape, queued, on_text),
            policy=self.retry,
            what=f"anthropic model {request.model}",
        )
        usage = response.usage
        cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
        cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
        details = getattr(usage, "output_tokens_details", None)
        # `output_tokens` is the billed total, thinking included; `thinking_tokens` is the
        # part of it spent thinking (SDK: OutputTokensDetails).
        thinking = (getattr(details, "thinking_tokens", None) or 0) if details else 0
        counted = Usage(
            input_tokens=usage.input_tokens + cache_read + cache_write,
            output_tokens=usage.output_tokens,
            cached_input_tokens=cache_read,
            cache_write_input_tokens=cache_write,
            reasoning_tokens=min(thinking, usage.output_tokens),
        )
        if response.stop_reason == "refusal":
            raise LLMError(
                f"anthropic model {request.model} refused to answer. Rephrase the question or"
                " use another model for this role"
            )
        envelope = sent_envelope(request, shape.mode, prompt_caching=self.prompt_caching)
        text = reply_text(response, request, shape.mode, envelope)
        if not text and response.stop_reason == "max_tokens" and counted.reasoning_tokens:
            # Returned, not raised: the thinking was billed, and only a completion carries
            # its cost to the budget. The caller re-asks, then fails naming max_tokens.
            log.warning(
                "anthropic model %s spent all %d output tokens thinking and gave no answer;"
                " raise DEBATEBOT_ROLES__<ROLE>__MAX_TOKENS or lower %s for its roles",
                request.model,
                request.max_tokens,
                EFFORT_SETTING,
            )
        return Completion(
            text=text,
            usage=counted,
            cost_usd=pricing.cost(counted),
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=response.stop_reason,
            enveloped=envelope is not None,
        )

    async def _create(
        self,
        params: dict[str, Any],
        model: str,
        shape: Shape,
        queued: Queued | None = None,
        on_text: TextSink | None = None,
    ) -> Any:
        async with slot_for(self.limits, model, queued) as slot:
            try:
                if on_text is not None:
                    manager = self._client.messages.stream(**params)
                    response, raw = await streamed(
                        manager, on_text, what=f"anthropic model {model}"
                    )
                else:
                    # The raw response, for its headers (the SDK's `.with_raw_response.`
                    # prefix); `parse()` gives what `create` returns.
                    raw = await self._client.messages.with_raw_response.create(**params)
                    response = await raw.parse()
            except anthropic.APITimeoutError as error:
                what = f"anthropic model {model}"
                raise timed_out(slot, what=what, timeout_s=self.timeout_s) from error
            except anthropic.APIConnectionError as error:
                raise unreachable(
                    error, provider="anthropic", base_url=self.base_url, api_key=self._api_key
                ) from error
            except anthropic.APIStatusError as error:
                slot.report(rate_feedback(error.response.headers, status=error.status_code))
                message = redact(error.api_message or error.message, self._api_key)
                if on_text is not None and refuses_streaming(error.status_code, message):
                    raise StreamRefusedError(
                        f"anthropic model {model} refused a streamed request (HTTP"
                        f" {error.status_code}: {message[:300]}); it is asked whole from now on"
                    ) from error
                part = refused_part(
                    status=error.status_code, error_type=error.type, message=message, shape=shape
                )
                if part is not None:
                    raise ShapeRefused(
                        f"anthropic model {model} refused {part.value}"
                        f" (HTTP {error.status_code}: {message[:300]}).",
                        part=part,
                    ) from error
                raise status_error(
                    provider="anthropic",
                    model=model,
                    status=error.status_code,
                    message=redact(error.message, self._api_key),
                    headers=error.response.headers,
                    key_variable=self.key_variable,
                ) from error
            slot.report(rate_feedback(raw.headers, status=raw.status_code, usage=response.usage))
            return response
