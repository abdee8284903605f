"""The narrow LLM interface every provider implements, and the structured-output helper.

One async call, `complete(request) -> Completion`. Structured output is never trusted: the helper
parses the text (repairing the common breakages: code fences, prose around the object, trailing
commas, JSON cut off at `max_tokens`), validates it with pydantic, re-asks with the validation
errors a bounded number of times, and otherwise raises `StructuredOutputError`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field, SkipValidation, ValidationError

from engine.envelope import Envelope
from engine.errors import StreamRefusedError, StructuredOutputError
from engine.models import Effort, Usage
from engine.pricing import Pricing

T = TypeVar("T", bound=BaseModel)

DEFAULT_STRUCTURED_ATTEMPTS = 3


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class LLMRequest(BaseModel):
    """One model call. The leading `stable_prefix_messages` are identical across a debate's turns,
    so providers with prompt caching can mark and reuse them."""

    messages: list[Message] = Field(min_length=1)
    model: str
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=1)
    effort: Effort | None = None
    """The role's thinking effort, for providers whose model takes one."""
    output_schema: Annotated[dict[str, Any] | None, SkipValidation] = None
    """Kept as given, not validated into a copy: it is the one dict `output_schema` built for
    its type, shared by every call (its size is remembered per dict, `_json_bytes`)."""
    schema_name: str | None = None
    envelope: Envelope | None = None
    """The debate's shared output schema and this call's key in it: providers whose vendor
    caches the schema ahead of the messages send it instead of `output_schema`."""
    stable_prefix_messages: int = Field(default=1, ge=0)
    shared_breaks: list[int] = Field(default_factory=list)
    """Where the text that later turns of the same round repeat (the debate so far, section by
    section) ends in the first message after the stable prefix: ascending character offsets.
    A provider whose cache works on content blocks (Anthropic) can split the message there."""
    cache_preamble: bool = True
    """Whether the stable prefix is worth marking for a cache that bills its writes (Anthropic):
    a later call of the debate reads it, or an earlier one wrote it (`engine/cache_plan.py`)."""
    cache_breaks: list[int] | None = None
    """Of `shared_breaks`, those worth marking for such a cache; None: the last one."""


class Completion(BaseModel):
    text: str
    usage: Usage
    cost_usd: float = Field(default=0.0, ge=0.0)
    provider: str
    model: str
    latency_s: float = Field(default=0.0, ge=0.0)
    finish_reason: str | None = None
    enveloped: bool = False
    """The provider sent the request's envelope, so the answer is under the envelope's key."""


class LLM(Protocol):
    """What the engine needs from a model: a provider name, the price a call to one of its
    models is billed at (the budget ceiling is checked on it before the call), and one async
    completion call."""

    @property
    def provider(self) -> str: ...

    def price_of(self, model: str) -> Pricing: ...

    async def complete(self, request: LLMRequest) -> Completion: ...


TextSink = Callable[[str], Awaitable[None]]
"""Told the reply's text so far, each time more of it has arrived."""


@runtime_checkable
class StreamingLLM(LLM, Protocol):
    """A model that can give its reply as it is written. `streams` says whether it will for
    `request` (a fake without a set rate, a model that cannot, says no)."""

    def streams(self, request: LLMRequest) -> bool: ...

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """The reply, as `complete` gives it, telling `on_text` the text so far as it comes.
        Raises StreamRefusedError, before any text, when the server will not stream."""
        ...


async def ask(llm: LLM, request: LLMRequest, on_text: TextSink | None) -> Completion:
    """One call: streamed to `on_text` when the model streams, else (or when the stream is
    refused before any text) asked whole, as it always was."""
    if on_text is not None and isinstance(llm, StreamingLLM) and llm.streams(request):
        try:
            return await llm.stream(request, on_text)
        except StreamRefusedError:
            pass
    return await llm.complete(request)


class StreamWatch(Protocol):
    """Follows a structured call as it streams: the current reply's text so far, and each reply
    that failed validation (and is asked again) after it was streamed."""

    async def text(self, raw: str) -> None: ...

    async def reasked(self, problem: str) -> None: ...


REQUEST_OVERHEAD_TOKENS = 1_000
"""Input tokens a request may be billed for beyond its text: a vendor's tool-use instructions
(Anthropic's are under 350 tokens), the tool's name and description, a response format's framing."""
MESSAGE_OVERHEAD_TOKENS = 16
"""Input tokens a message may be billed for beyond its text: role and turn markers (a few)."""


def input_token_bound(request: LLMRequest) -> int:
    """At most how many input tokens `request` can be billed for, with no tokenizer at hand.

    The hosted vendors' tokenizers are byte-level BPE: every token stands for at least one byte
    of the text, so no text takes more tokens than its UTF-8 bytes (English takes about a
    quarter of that). So: the bytes of every message and of the output schema as JSON (a
    provider sends the schema once, or a subset of it; or the envelope instead), plus a fixed
    allowance per message and per request for what is not text (role markers, tool-use
    framing). The bound is loose on purpose: a budget check on it can refuse a call that would
    have fit, never let through one that does not (`engine/bound.py` tightens it from what
    earlier calls of the debate reported).
    """
    text_bytes = sum(len(m.content.encode("utf-8")) for m in request.messages)
    return (
        text_bytes
        + beside_messages_bound(request)
        + MESSAGE_OVERHEAD_TOKENS * len(request.messages)
        + REQUEST_OVERHEAD_TOKENS
    )


def beside_messages_bound(request: LLMRequest) -> int:
    """At most how many input tokens what a request sends beside its messages takes: the output
    schema as JSON (or the envelope, whichever is larger, since a provider sends one or the
    other) and the envelope's instruction, one token per byte."""
    schema_bytes = 0
    if request.output_schema is not None:
        schema_bytes = _json_bytes(request.output_schema)
    if request.envelope is None:
        return schema_bytes
    instruction = len(request.envelope.instruction().encode("utf-8"))
    return max(schema_bytes, request.envelope.size_bytes) + instruction


_SCHEMA_BYTES: dict[int, tuple[dict[str, Any], int]] = {}


def _json_bytes(schema: dict[str, Any]) -> int:
    """`schema`'s size as JSON. Remembered per dict (up to 1,024): every call of a type shares
    the one `output_schema` built for it, and serialising it again on every call's bound was a
    measurable share of a worker's CPU. The dict is kept beside its size so its id is not
    reused by another while remembered."""
    known = _SCHEMA_BYTES.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    size = len(json.dumps(schema).encode("utf-8"))
    if len(_SCHEMA_BYTES) < 1_024:
        _SCHEMA_BYTES[id(schema)] = (schema, size)
    return size


@dataclass
class StructuredResult(Generic[T]):
    """A validated value plus every completion it took (re-asks included), for the audit."""

    value: T
    raw_text: str
    completions: list[Completion] = field(default_factory=list)

    @property
    def reasks(self) -> int:
        return len(self.completions) - 1

    @property
    def usage(self) -> Usage:
        return Usage.of(completion.usage for completion in self.completions)

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.completions)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.completions)


def _closed(node: Any, defs: dict[str, Any], *, inline: bool) -> Any:
    """`node` with every object closed (`additionalProperties: false`, every property
    required), titles and defaults dropped, and local `$ref`s inlined when `inline`."""
    if isinstance(node, dict):
        if "$ref" in node and inline:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _closed(defs[name], defs, inline=inline)
        resolved = {
            k: _closed(v, defs, inline=inline)
            for k, v in node.items()
            if k not in ("title", "default")
        }
        if resolved.get("type") == "object":
            resolved.setdefault("additionalProperties", False)
            resolved["required"] = list(resolved.get("properties", {}))
        return resolved
    if isinstance(node, list):
        return [_closed(item, defs, inline=inline) for item in node]
    return node


@functools.lru_cache(maxsize=256)
def output_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to providers: pydantic's, with `$ref`s inlined and no extra keys.

    Inlining matters because several constrained decoders (llama.cpp grammars, some
    OpenAI-compatible servers) handle local references poorly or not at all. Built once per
    type: generating it costs more CPU than the rest of a turn, so callers share one dict and
    must not change it (providers derive their variants as copies).
    """
    schema = output_type.model_json_schema()
    defs = schema.pop("$defs", {})
    inlined: dict[str, Any] = _closed(schema, defs, inline=True)
    return inlined


def referencing_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """`output_schema`'s rules with the local `$ref`s kept, so a type used in several places
    is written once (in `$defs`): for the vendors' structured outputs, which take them
    (OpenAI's strict mode and Anthropic's structured outputs both accept local references)."""
    schema = output_type.model_json_schema()
    defs = schema.pop("$defs", {})
    closed: dict[str, Any] = _closed(schema, defs, inline=False)
    if defs:
        closed["$defs"] = {name: _closed(d, defs, inline=False) for name, d in defs.items()}
    return closed


def describe_schema(schema: dict[str, Any]) -> str:
    """The fields of `schema` as a short prose list for the prompt.

    Prose rather than a JSON skeleton: small models copy a skeleton's placeholders ("string")
    verbatim as their answer, while a field list leaves the content to them.
    """

    def kind(node: dict[str, Any]) -> str:
        if "enum" in node:
            return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
        if node.get("type") == "array":
            return f"a list of {kind(node.get('items', {}))}"
        if node.get("type") == "object":
            kinds = {name: kind(sub) for name, sub in node["properties"].items()}
            if len(kinds) > 1 and len(set(kinds.values())) == 1:
                # Said once for all: every role's prompt carries this text on every turn.
                return f"an object {{{', '.join(kinds)}: each {next(iter(kinds.values()))}}}"
            inner = ", ".join(f"{name}: {text}" for name, text in kinds.items())
            return f"an object {{{inner}}}"
        if node.get("type") == "integer" and "minimum" in node and "maximum" in node:
            return f"an integer from {node['minimum']} to {node['maximum']}"
        if node.get("type") == "string":
            return "text"
        if "anyOf" in node:
            return " or ".join(kind(option) for option in node["anyOf"])
        return str(node.get("type", "a value"))

    return "\n".join(
        f'- "{name}": {kind(sub)}' for name, sub in schema.get("properties", {}).items()
    )


@functools.lru_cache(maxsize=256)
def describe_output(output_type: type[BaseModel]) -> str:
    """`describe_schema` of `output_type`'s schema, built once per type."""
    return describe_schema(output_schema(output_type))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _close_truncated(text: str) -> str:
    """Close the strings, arrays and objects left open when generation stopped mid-object."""
    stack: list[str] = []
    in_string = False
    escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    repaired = text + ('"' if in_string else "")
    repaired = re.sub(r",\s*$", "", repaired.rstrip())
    repaired = re.sub(r":\s*$", ": null", repaired)
    return repaired + "".join(reversed(stack))


# strict=False: grammar-constrained decoders emit raw control characters (newlines, tabs)
# inside strings; refusing them helps nobody. One decoder for every reply: `json.loads` with an
# option builds a new one per call.
_LENIENT_JSON = json.JSONDecoder(strict=False)


def parse_json_lenient(text: str) -> Any:
    """Parse a model's JSON reply, repairing common breakage; raises ValueError if hopeless."""
    candidate = text.strip()
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    start = candidate.find("{")
    if start == -1:
        raise ValueError("the reply contains no JSON object")
    candidate = candidate[start:]
    end = candidate.rfind("}")

    def attempts() -> Iterator[str]:
        # The repair of a cut-off reply is built only when the reply as it stands fails.
        if end != -1:
            yield candidate[: end + 1]
        yield _close_truncated(candidate)

    last_error: json.JSONDecodeError | None = None
    for attempt in attempts():
        for variant in (attempt, _TRAILING_COMMA.sub(r"\1", attempt)):
            try:
                return _LENIENT_JSON.decode(variant)
            except json.JSONDecodeError as error:
                last_error = error
            except RecursionError:
                # Python's decoder recurses once per level: garbage such as "{[[[[…" is a
                # reply to re-ask, not a crash.
                raise ValueError("the reply nests JSON deeper than any answer could") from None
    raise ValueError(f"the reply is not valid JSON ({last_error})")


def _problem_text(error: ValueError | ValidationError) -> str:
    if isinstance(error, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in item['loc']) or '(root)'}: {item['msg']}"
            for item in error.errors()[:8]
        ]
        return "; ".join(problems)
    return str(error)


async def complete_structured(
    llm: LLM,
    request: LLMRequest,
    output_type: type[T],
    *,
    max_attempts: int = DEFAULT_STRUCTURED_ATTEMPTS,
    watch: StreamWatch | None = None,
) -> StructuredResult[T]:
    """Call `llm` until its reply validates as `output_type`, re-asking with the errors.

    A reply to the request's envelope (`Completion.enveloped`) is first taken out of it: one
    under another key, or several, is re-asked like any invalid reply.
    Raises StructuredOutputError after `max_attempts` invalid replies, keeping every raw reply.
    Spend is accounted by the caller's metering wrapper around `llm`, call by call. With
    `watch`, each reply is streamed to it when the model streams, and told when it is re-asked.
    """
    schema = output_schema(output_type)
    current = request.model_copy(
        update={"output_schema": schema, "schema_name": output_type.__name__}
    )
    completions: list[Completion] = []
    raw_outputs: list[str] = []
    problem = ""
    for _ in range(max_attempts):
        completion = await ask(llm, current, watch.text if watch is not None else None)
        completions.append(completion)
        raw_outputs.append(completion.text)
        try:
            reply = parse_json_lenient(completion.text)
            if completion.enveloped and current.envelope is not None:
                reply = current.envelope.unwrap(reply, schema)
            value = output_type.model_validate(reply)
        except (ValueError, ValidationError) as error:
            problem = _problem_text(error)
            if watch is not None:
                await watch.reasked(problem)
            current = current.model_copy(
                update={
                    "messages": [
                        *request.messages,
                        Message(role="assistant", content=completion.text[:4_000]),
                        Message(
                            role="user",
                            content=(
                                f"Your reply was invalid: {problem}. Reply again with only one"
                                " JSON object of exactly this shape, every value within its"
                                f" limits:\n{describe_schema(schema)}"
                            ),
                        ),
                    ]
                }
            )
            continue
        return StructuredResult(value=value, raw_text=completion.text, completions=completions)
    raise StructuredOutputError(
        f"{llm.provider} model {request.model} gave no valid {output_type.__name__} in"
        f" {max_attempts} attempts; last problem: {problem}. Try a larger model, a lower"
        " temperature or a higher max_tokens for this role.",
        raw_outputs=raw_outputs,
    )
