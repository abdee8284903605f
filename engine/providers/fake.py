"""Fake models for tests and demos: a scripted one, a function-driven one, and one that fills any
output schema (`SchemaFillingLLM`, the `--provider fake` model).

All record every request they receive (`calls`, unless built with `record=False` as the
`--provider fake` model is: a long-running worker or serve would keep every prompt), count tokens
roughly (4 characters a token, or exactly as a test dictates) and price them (one price, or a
price per model name), so budget and audit logic run unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import re
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel

from engine.errors import LLMError, StreamRefusedError
from engine.llm import Completion, LLMRequest, TextSink
from engine.models import Usage
from engine.pricing import FREE, Pricing

Reply = str | dict[str, Any] | BaseModel | Exception
ReplyFunction = Callable[[LLMRequest], Reply | Awaitable[Reply]]
PriceSource = Pricing | Callable[[str], Pricing]
"""One price for every model name, or the price of each (the `--provider fake` model reads the
price table, so a test can price it with DEBATEBOT_PRICES)."""


def _as_text(reply: str | dict[str, Any] | BaseModel) -> str:
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    if isinstance(reply, dict):
        return json.dumps(reply)
    return reply


CHARS_PER_TOKEN = 4
"""How many characters the fakes count as a token (`estimate_tokens`, and what they stream)."""


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for fakes that have no tokenizer."""
    return max(1, len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class StreamRate:
    """How fast a fake writes its reply: the first token after `first_token_s`, then
    `tokens_per_s` (a token being `CHARS_PER_TOKEN` characters), so tests and benchmarks see a
    vendor's pace without a vendor. A fake with a rate takes as long whether it streams or not."""

    tokens_per_s: float
    first_token_s: float = 0.0
    streams: bool = True
    """False: the fake writes at this pace but answers whole, as a provider that cannot stream."""

    def __post_init__(self) -> None:
        if self.tokens_per_s <= 0 or self.first_token_s < 0:
            raise ValueError("a stream rate needs tokens_per_s > 0 and first_token_s >= 0")

    def duration_s(self, text: str) -> float:
        """How long writing `text` takes, from the call's start to its last token."""
        tokens = max(1, -(-len(text) // CHARS_PER_TOKEN))
        return self.first_token_s + (tokens - 1) / self.tokens_per_s

    async def write(self, text: str, on_text: TextSink) -> None:
        """Tells `on_text` the text so far, token by token, at this rate (each token due at a
        fixed time from the start, so the pace does not drift with the listener's time)."""
        start = time.monotonic()
        for index, end in enumerate(
            range(CHARS_PER_TOKEN, len(text) + CHARS_PER_TOKEN, CHARS_PER_TOKEN)
        ):
            due = start + self.first_token_s + index / self.tokens_per_s
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await on_text(text[:end])


class FakeOptions(TypedDict, total=False):
    """What every fake takes besides its replies: the provider and model it answers as, its
    prices, a delay before each answer, the rate it writes at (and streams, when set), a fixed
    usage (else one estimated from the text), and whether it keeps each request in `calls`."""

    provider: str
    model: str
    pricing: PriceSource
    delay_s: float
    stream_rate: StreamRate | None
    usage: Usage | None
    record: bool


class _RecordingLLM(ABC):
    def __init__(
        self,
        *,
        provider: str = "fake",
        model: str = "fake-model",
        pricing: PriceSource = FREE,
        delay_s: float = 0.0,
        stream_rate: StreamRate | None = None,
        usage: Usage | None = None,
        record: bool = True,
    ) -> None:
        self._provider = provider
        self.model = model
        self.pricing = pricing
        self.delay_s = delay_s
        self.stream_rate = stream_rate
        self.fixed_usage = usage
        self.record = record
        self.calls: list[LLMRequest] = []

    @property
    def provider(self) -> str:
        return self._provider

    def price_of(self, model: str) -> Pricing:
        return self.pricing if isinstance(self.pricing, Pricing) else self.pricing(model)

    async def _received(self, request: LLMRequest) -> None:
        """Record the request (when recording) and take the configured latency."""
        if self.record:
            self.calls.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)

    @abstractmethod
    async def _reply(self, request: LLMRequest) -> Reply:
        """This fake's answer to `request` (an Exception is raised instead of answered)."""

    async def complete(self, request: LLMRequest) -> Completion:
        await self._received(request)
        completion = self._completion(request, await self._reply(request))
        rate = self.rate_for(request)
        if rate is not None:
            await asyncio.sleep(rate.duration_s(completion.text))
        return completion

    def rate_for(self, request: LLMRequest) -> StreamRate | None:
        """The rate this fake writes `request`'s reply at (a test may pace one role apart)."""
        return self.stream_rate

    def streams(self, request: LLMRequest) -> bool:
        """Streams only with a set rate: a fake without one answers whole, like a provider that
        cannot stream."""
        rate = self.rate_for(request)
        return rate is not None and rate.streams

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """The same reply as `complete`, written to `on_text` at the set rate."""
        rate = self.rate_for(request)
        if rate is None or not rate.streams:
            raise StreamRefusedError("this fake model does not stream; it answers whole")
        await self._received(request)
        completion = self._completion(request, await self._reply(request))
        await rate.write(completion.text, on_text)
        return completion

    def _completion(self, request: LLMRequest, reply: Reply) -> Completion:
        if isinstance(reply, Exception):
            raise reply
        text = _as_text(reply)
        rate = self.rate_for(request)
        usage = self.fixed_usage or Usage(
            input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
            output_tokens=estimate_tokens(text),
        )
        return Completion(
            text=text,
            usage=usage,
            cost_usd=self.price_of(request.model).cost(usage),
            provider=self.provider,
            model=request.model,
            latency_s=self.delay_s + (rate.duration_s(text) if rate else 0.0),
            finish_reason="stop",
        )


class ScriptedLLM(_RecordingLLM):
    """Hands out queued replies in order; an Exception in the queue is raised instead."""

    def __init__(self, replies: Iterable[Reply], **options: Unpack[FakeOptions]) -> None:
        super().__init__(**options)
        self.replies: deque[Reply] = deque(replies)

    async def _reply(self, request: LLMRequest) -> Reply:
        if not self.replies:
            raise LLMError(
                f"ScriptedLLM ran out of replies after {len(self.calls) - 1} calls;"
                " queue one reply per expected call"
            )
        return self.replies.popleft()


class FunctionLLM(_RecordingLLM):
    """Answers each request with `function(request)`, which may be sync or async."""

    def __init__(self, function: ReplyFunction, **options: Unpack[FakeOptions]) -> None:
        super().__init__(**options)
        self.function = function

    async def _reply(self, request: LLMRequest) -> Reply:
        reply = self.function(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply


_WORDS = [
    "latency",
    "rollback",
    "owner",
    "budget",
    "schema",
    "audit",
    "fallback",
    "migration",
    "quota",
    "retention",
    "cache",
    "failover",
    "tenant",
    "review",
    "threshold",
    "contract",
    "incident",
    "alert",
    "capacity",
    "vendor",
]
_PATTERN_ATOM = re.compile(r"\\[dw.\-\\^$]|\[[^\]]+\]|[^\\\[(){}*+?|]")
_QUANTIFIER = re.compile(r"\{(\d+)(?:,(\d*))?\}|[?*+]")


def _class_members(atom: str) -> list[str]:
    if atom == "\\d":
        return list("0123456789")
    if atom == "\\w":
        return list("abcdefghijklmnopqrstuvwxyz")
    if atom.startswith("\\"):
        return [atom[1]]
    if not atom.startswith("["):
        return [atom]
    body, members = atom[1:-1], []
    if body.startswith("^"):
        raise LLMError(f"the fake model cannot fill negated character classes ({atom})")
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            members += [chr(c) for c in range(ord(body[i]), ord(body[i + 2]) + 1)]
            i += 3
        else:
            members.append(body[i])
            i += 1
    return members


def text_for_pattern(pattern: str, index: int) -> str:
    """A string matching `pattern` (literals, escapes, classes, quantifiers; no groups or
    alternation), its classes picking member `index`, so list items come out numbered in order:
    `^PRO-[1-5]$` gives PRO-1, PRO-2, ... for indexes 0, 1, ..."""
    body = pattern.removeprefix("^").removesuffix("$")
    out, position = [], 0
    while position < len(body):
        atom = _PATTERN_ATOM.match(body, position)
        if atom is None:
            raise LLMError(
                f"the fake model cannot fill the pattern {pattern!r}; give the test a"
                " FunctionLLM reply for this schema instead"
            )
        position = atom.end()
        repeat = 1
        quantifier = _QUANTIFIER.match(body, position)
        if quantifier is not None:
            position = quantifier.end()
            token = quantifier.group(0)
            repeat = 0 if token in "?*" else 1 if token == "+" else int(quantifier.group(1))
        members = _class_members(atom.group(0))
        out.append(members[index % len(members)] * repeat)
    return "".join(out)


class _Filler:
    """Walks an (inlined) JSON schema and builds a value every bound, enum and pattern of it
    accepts. Array items get their index, so enum-typed ids within a list come out distinct."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def value(
        self, node: dict[str, Any], name: str, index: int | None = None, offset: int = 0
    ) -> Any:
        """A value for `node`; `index` is the position within the enclosing list, if any."""
        if "const" in node:
            return node["const"]
        if "enum" in node:
            choices = node["enum"]
            if index is None:
                return self.rng.choice(choices)
            return choices[(offset + index) % len(choices)]
        options = node.get("anyOf") or node.get("oneOf")
        if options:
            real = [o for o in options if o.get("type") != "null"] or options
            return self.value(real[0], name, index, offset)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            return {
                key: self.value(sub, key, index, offset)
                for key, sub in node.get("properties", {}).items()
            }
        if kind == "array":
            return self.array(node, name)
        if kind == "string":
            if "pattern" in node:
                return text_for_pattern(node["pattern"], index or 0)
            return self.string(node, name)
        if kind == "integer":
            low = int(node.get("minimum", node.get("exclusiveMinimum", -1) + 1))
            high = int(node.get("maximum", node.get("exclusiveMaximum", low + 1) - 1))
            return self.rng.randint(low, max(low, high))
        if kind == "number":
            bottom = float(node.get("minimum", node.get("exclusiveMinimum", 0.0)))
            top = float(node.get("maximum", node.get("exclusiveMaximum", bottom + 1.0)))
            return round(self.rng.uniform(bottom, top), 2)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        raise LLMError(f"the fake model cannot fill field {name!r} of schema {node}")

    def array(self, node: dict[str, Any], name: str) -> list[Any]:
        low = int(node.get("minItems", 0))
        high = int(node.get("maxItems", max(low, 3)))
        count = min(high, max(low, self.rng.randint(1, 2)))
        items = node.get("items", {"type": "string"})
        offset = self.rng.randrange(97)
        return [self.value(items, name, i, offset) for i in range(count)]

    def string(self, node: dict[str, Any], name: str) -> str:
        low, high = int(node.get("minLength", 1)), int(node.get("maxLength", 400))
        words = [self.rng.choice(_WORDS) for _ in range(self.rng.randint(3, 6))]
        text = f"[fake] {name.replace('_', ' ')}: {' '.join(words)}"
        while len(text) < low:
            text += f" {self.rng.choice(_WORDS)}"
        return text[:high].rstrip() or text[:high]


def fill_schema(schema: dict[str, Any], *, seed: str | int = 0) -> Any:
    """A value valid against `schema`, the same for the same seed."""
    return _Filler(random.Random(str(seed))).value(schema, "root")


class SchemaFillingLLM(_RecordingLLM):
    """Answers every structured request with a value built from its JSON schema, like
    pydantic-ai's `TestModel`: deterministic for a seed and a request, valid against every
    protocol's output types, clearly fake ("[fake] ..."). `script` maps schema names to fixed
    replies (the readable canned adversarial debate) that take precedence over filling."""

    def __init__(
        self,
        *,
        seed: int = 0,
        script: dict[str, Any] | None = None,
        **options: Unpack[FakeOptions],
    ) -> None:
        super().__init__(**options)
        self.seed = seed
        self.script = dict(script or {})

    async def _reply(self, request: LLMRequest) -> Reply:
        if request.schema_name in self.script:
            reply: Reply = self.script[request.schema_name or ""]
            return reply
        if request.output_schema is None:
            raise LLMError("the schema-filling fake model answers structured requests only")
        digest = hashlib.sha256(
            "\n".join(m.content for m in request.messages).encode()
        ).hexdigest()[:16]
        filled: Reply = fill_schema(request.output_schema, seed=f"{self.seed}:{digest}")
        return filled


CANNED_DEBATE_REPLIES: dict[str, dict[str, Any]] = {
    "Proposition": {
        "thesis": "[fake] The team should adopt the proposal as written.",
        "scope": "[fake] The proposal under discussion and nothing else.",
        "criteria": ["[fake] correctness", "[fake] operational risk", "[fake] cost"],
        "key_evidence": [],
    },
    "ProposerTurn": {
        "thesis": "[fake] The proposal meets the criteria.",
        "supporting_arguments": ["[fake] It addresses the stated problem directly."],
        "evidence_cited": [],
    },
    "CriticTurn": {
        "thesis": "[fake] The proposal leaves a failure mode unaddressed.",
        "counter_arguments": ["[fake] Nothing covers the case where the new component fails."],
        "evidence_cited": [],
        "challenge_strength": 7,
    },
    "RebuttalTurn": {
        "thesis": "[fake] The failure mode is real and can be mitigated.",
        "rebuttals": ["[fake] A fallback path answers the failure-mode objection."],
        "concessions": ["[fake] The proposal as written has no fallback."],
    },
    "ModeratorTurn": {
        "proposer_quality": {"logic": 6, "evidence": 5, "completeness": 5, "consistency": 7},
        "critic_quality": {"logic": 7, "evidence": 5, "completeness": 6, "consistency": 7},
        "resolved_points": ["[fake] A fallback is needed."],
        "unresolved_points": ["[fake] Who owns the fallback."],
        "recommend_another_round": False,
        "decision": "revise",
        "synthesis": "[fake] Revise the proposal to add a fallback path, then adopt it.",
        "confidence_level": "MODERATE",
        "uncertainties": ["[fake] Real load figures are unknown."],
    },
}
