"""What each vendor bills for a debate's requests under its documented prompt-cache rules, and
what an ideal prefix cache would bill; pure functions and small state machines, fed the request
bodies an adapter sent (`openai_call`, `anthropic_call`) in the order they started.

OpenAI (prompt-caching guide; Chat Completions):
- the cached prefix runs in the order tools, then the `response_format` schema ("The
  structured output schema serves as a prefix to the system message"), then the messages;
- a prompt is cached only from 1,024 tokens, and hits come in steps of 128 tokens (1,024,
  1,152, …); requests are routed on a hash of the first ~256 tokens, which any hit of 1,024
  tokens shares, so routing is taken to succeed (no overflow past a machine's request rate, and
  `prompt_cache_key` changes nothing here);
- a cache is per model; gpt-5.6 and later bill what they write (`cache_write_per_mtok` in the
  catalogue, 1.25× input) for 30 minutes (`prompt_cache_options.ttl`); earlier models write
  for free and keep it in memory, taken as 5 minutes of inactivity (the guide says 5 to 10);
  `prompt_cache_retention: "24h"` keeps it a day. Explicit breakpoints are not simulated.

Anthropic (prompt-caching, structured-outputs and thinking pages):
- the prefix runs tools, then system, then messages; only a block marked `cache_control` (at
  most 4, or the top-level automatic mark on the last block) is written, with its TTL (`5m`
  default, `1h`), and only when the prefix up to it reaches the model's minimum
  (`ANTHROPIC_MIN_TOKENS`); a write costs the catalogue's write rate (1.25× input; a `1h`
  write 2× input);
- each breakpoint reads the longest entry at its own block or up to 19 blocks before it (a
  20-block lookback); a read refreshes the entry's TTL, counted from the start of the request;
- `output_config.format` (its schema, counted as input ahead of the tools) keys the whole
  cache; thinking, effort and `tool_choice` key the message blocks only.

Both: a write is readable only by requests that start after the writing request ended (calls
in flight together each pay their own write); a cache is per model.

Ideal: every call reads, at its model's read rate, the longest prefix of its text (system and
messages) that any call started before it sent (any model, ended or not), and its output
schema or tools when such a call sent the same; no minimum, no write surcharge, no expiry.

Tokens are estimated as UTF-8 bytes / 4 (the stand-ins' and the fake model's rule), for every
vendor alike: a real tokenizer scales every count, which matters to a ratio mainly where it
moves a prefix across a vendor's minimum.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.bound import common_prefix
from engine.models import Usage
from engine.pricing import Pricing

OPENAI_MIN_TOKENS = 1_024
OPENAI_STEP = 128
OPENAI_TTL_S = {"in_memory": 5 * 60.0, "30m": 30 * 60.0, "24h": 24 * 3600.0}
ANTHROPIC_TTL_S = {"5m": 5 * 60.0, "1h": 3600.0}
ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 20
ANTHROPIC_1H_WRITE_FACTOR = 2.0
ANTHROPIC_MIN_TOKENS = {
    # Anthropic, prompt-caching (fetched 2026-09) and whats-new-sonnet-5-5 (2026-09-29).
    "claude-fable-5-1": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-5-5": 512,
    "claude-sonnet-5-5": 512,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1_024,
    "claude-sonnet-5": 1_024,
    "claude-sonnet-4-6": 1_024,
    "claude-sonnet-4-5": 1_024,
    "claude-opus-4-7": 2_048,
    "claude-mythos-preview": 2_048,
    "claude-opus-4-6": 4_096,
    "claude-opus-4-5": 4_096,
    "claude-haiku-4-5": 4_096,
}
ANTHROPIC_UNKNOWN_MIN_TOKENS = 4_096
"""For a model whose minimum Anthropic does not document (Claude Haiku 5.5, Fable 5.2): the
largest documented one, Haiku 4.5's, so the vendor bill is never understated."""
_DATED = re.compile(r"-\d{8}$")


def estimate_tokens(text: str) -> float:
    """Tokens of `text`: UTF-8 bytes / 4."""
    return len(text.encode("utf-8")) / 4


class Part(StrEnum):
    SCHEMA = "schema"
    """An output schema or a tool definition."""
    TEXT = "text"
    """System or message text."""


@dataclass(frozen=True)
class Block:
    """One piece of a request in the vendor's cache order."""

    text: str
    part: Part = Part.TEXT
    in_messages: bool = False
    """An Anthropic `messages` block, whose cache thinking and effort changes invalidate."""
    breakpoint: str | None = None
    """An Anthropic `cache_control` mark: its TTL (`5m`, `1h`)."""

    @property
    def tokens(self) -> float:
        return estimate_tokens(self.text)


@dataclass(frozen=True)
class Call:
    """One answered request: its model, its blocks in the vendor's cache order, its output,
    when it started and ended (seconds), and what else keys its cache."""

    vendor: str
    model: str
    blocks: tuple[Block, ...]
    output_tokens: float
    at: float = 0.0
    done: float = 0.0
    settings: str = ""
    """Anthropic: thinking, effort and tool_choice, which key the message blocks' cache."""
    ttl: str | None = None
    """OpenAI: the retention the request asks for (`in_memory`, `30m`, `24h`), else the
    model's default."""

    @property
    def input_tokens(self) -> float:
        return sum(block.tokens for block in self.blocks)


@dataclass(frozen=True)
class Bill:
    """What one call is billed: input tokens (all), of them read from and written to the cache
    (`write_1h`: of the writes, those kept an hour), output tokens, and USD."""

    input_tokens: float
    read_tokens: float
    write_tokens: float
    output_tokens: float
    usd: float
    write_1h: float = 0.0


class CacheRuleError(ValueError):
    """A request the vendor would refuse, or a cache mode the simulation does not model."""


def charge(
    pricing: Pricing,
    *,
    input_tokens: float,
    read: float,
    write: float,
    output: float,
    write_1h: float = 0.0,
) -> Bill:
    """The bill of one call at `pricing` (the catalogue's rates, long prompts included); a
    one-hour write costs twice the input rate (Anthropic), a 5-minute or 30-minute one the
    catalogue's write rate."""
    usage = Usage(
        input_tokens=round(input_tokens),
        output_tokens=round(output),
        cached_input_tokens=round(read),
        cache_write_input_tokens=round(write - write_1h),
    )
    usd = pricing.cost(usage)
    if write_1h:
        tier = pricing.long_context
        factor = tier.input_factor if tier and usage.input_tokens > tier.above_input_tokens else 1
        # Pricing.cost billed them as plain input; a one-hour write costs 2× that.
        extra = ANTHROPIC_1H_WRITE_FACTOR - 1.0
        usd += factor * round(write_1h) * pricing.input_per_mtok * extra / 1_000_000
    return Bill(
        input_tokens=input_tokens,
        read_tokens=read,
        write_tokens=write,
        output_tokens=output,
        usd=usd,
        write_1h=write_1h,
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if part.get("type") == "text" else _json(part) for part in content
    )


def openai_call(
    body: Mapping[str, Any], *, output_tokens: float, at: float = 0.0, done: float = 0.0
) -> Call:
    """A Chat Completions request body as OpenAI's cache sees it: tools, response format,
    messages."""
    options = body.get("prompt_cache_options") or {}
    if options.get("mode") == "explicit":
        raise CacheRuleError(
            "OpenAI's explicit prompt-cache mode is not simulated; add its breakpoints to"
            " benchmarks/vendor_cache.py"
        )
    blocks: list[Block] = []
    if body.get("tools"):
        blocks.append(Block(_json(body["tools"]), Part.SCHEMA))
    response_format = body.get("response_format")
    if response_format and response_format.get("type") != "text":
        blocks.append(Block(_json(response_format), Part.SCHEMA))
    for message in body["messages"]:
        blocks.append(Block(f"<{message['role']}>\n{_content_text(message['content'])}\n"))
    ttl = options.get("ttl") or body.get("prompt_cache_retention")
    return Call(
        vendor="openai",
        model=str(body["model"]),
        blocks=tuple(blocks),
        output_tokens=output_tokens,
        at=at,
        done=done,
        ttl=str(ttl) if ttl else None,
    )


def _mark(item: Mapping[str, Any]) -> str | None:
    control = item.get("cache_control")
    if not control:
        return None
    return str(control.get("ttl", "5m"))


def _without_mark(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != "cache_control"}


def anthropic_call(
    body: Mapping[str, Any], *, output_tokens: float, at: float = 0.0, done: float = 0.0
) -> Call:
    """A Messages API request body as Anthropic's cache sees it: output format, tools, system
    blocks, message blocks, with their `cache_control` marks."""
    config = body.get("output_config") or {}
    blocks: list[Block] = []
    if config.get("format") is not None:
        blocks.append(Block(_json(config["format"]), Part.SCHEMA))
    for tool in body.get("tools") or []:
        blocks.append(Block(_json(_without_mark(tool)), Part.SCHEMA, breakpoint=_mark(tool)))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(Block(system))
    elif system:
        for item in system:
            text = item["text"] if item.get("type") == "text" else _json(_without_mark(item))
            blocks.append(Block(text, breakpoint=_mark(item)))
    for message in body["messages"]:
        role = f"<{message['role']}>\n"
        content = message["content"]
        if isinstance(content, str):
            blocks.append(Block(role + content, in_messages=True))
            continue
        for index, item in enumerate(content):
            text = item["text"] if item.get("type") == "text" else _json(_without_mark(item))
            lead = role if index == 0 else ""
            blocks.append(Block(lead + text, in_messages=True, breakpoint=_mark(item)))
    automatic = _mark(body)
    if automatic and blocks and blocks[-1].breakpoint is None:
        last = blocks[-1]
        blocks[-1] = Block(last.text, last.part, last.in_messages, automatic)
    settings = _json(
        {
            "thinking": body.get("thinking"),
            "effort": config.get("effort"),
            "tool_choice": body.get("tool_choice"),
        }
    )
    return Call(
        vendor="anthropic",
        model=str(body["model"]),
        blocks=tuple(blocks),
        output_tokens=output_tokens,
        at=at,
        done=done,
        settings=settings,
    )


def anthropic_min_tokens(model: str) -> int:
    """The shortest prefix Anthropic caches for `model` (see ANTHROPIC_UNKNOWN_MIN_TOKENS)."""
    return ANTHROPIC_MIN_TOKENS.get(_DATED.sub("", model), ANTHROPIC_UNKNOWN_MIN_TOKENS)


def anthropic_min_documented(model: str) -> bool:
    """Whether Anthropic documents `model`'s minimum (else it is assumed)."""
    return _DATED.sub("", model) in ANTHROPIC_MIN_TOKENS


@dataclass
class _Entry:
    ready: float
    """When the writing request ended: readable by requests that start from then on."""
    expires: float
    ttl_s: float
    text: str = ""
    tokens: float = 0.0

    def readable(self, at: float) -> bool:
        return self.ready <= at <= self.expires


PriceOf = Callable[[str, str], Pricing]
"""The price of (vendor, model)."""


@dataclass
class OpenAICache:
    """OpenAI's automatic prefix cache over a sequence of calls."""

    price_of: PriceOf
    entries: dict[str, list[_Entry]] = field(default_factory=dict)

    def ttl_s(self, call: Call, pricing: Pricing) -> float:
        if call.ttl is not None:
            if call.ttl not in OPENAI_TTL_S:
                raise CacheRuleError(f"OpenAI cache retention {call.ttl!r} is not simulated")
            return OPENAI_TTL_S[call.ttl]
        return OPENAI_TTL_S["30m" if pricing.cache_write_per_mtok is not None else "in_memory"]

    def bill(self, call: Call) -> Bill:
        pricing = self.price_of(call.vendor, call.model)
        text = "".join(block.text for block in call.blocks)
        total = estimate_tokens(text)
        read = 0.0
        for entry in self.entries.get(call.model, []):
            if not entry.readable(call.at):
                continue
            shared = min(estimate_tokens(text[: common_prefix(text, entry.text)]), entry.tokens)
            hit = math.floor(shared / OPENAI_STEP) * OPENAI_STEP
            if hit >= OPENAI_MIN_TOKENS:
                read = max(read, hit)
        # Every prompt of 1,024 tokens or more is cached anew (its expiry from now), so a prefix
        # in use stays cached: no entry needs refreshing.
        write = 0.0
        if total >= OPENAI_MIN_TOKENS:
            cached = math.floor(total / OPENAI_STEP) * OPENAI_STEP
            if pricing.cache_write_per_mtok is not None:
                write = max(0.0, cached - read)
            ttl = self.ttl_s(call, pricing)
            self.entries.setdefault(call.model, []).append(
                _Entry(ready=call.done, expires=call.at + ttl, ttl_s=ttl, text=text, tokens=cached)
            )
        return charge(
            pricing, input_tokens=total, read=read, write=write, output=call.output_tokens
        )


@dataclass
class AnthropicCache:
    """Anthropic's breakpoint cache over a sequence of calls."""

    price_of: PriceOf
    min_tokens: Callable[[str], int] = anthropic_min_tokens
    entries: dict[str, _Entry] = field(default_factory=dict)

    @staticmethod
    def keys(call: Call) -> list[str]:
        """The cache key of the prefix ending at each block."""
        keys: list[str] = []
        running = hashlib.sha256(call.model.encode())
        for block in call.blocks:
            running.update(block.part.encode() + b"\0" + block.text.encode() + b"\0")
            key = running.copy()
            if block.in_messages:
                key.update(call.settings.encode())
            keys.append(key.hexdigest())
        return keys

    def bill(self, call: Call) -> Bill:
        pricing = self.price_of(call.vendor, call.model)
        marks = [i for i, block in enumerate(call.blocks) if block.breakpoint is not None]
        if len(marks) > ANTHROPIC_MAX_BREAKPOINTS:
            raise CacheRuleError(
                f"{len(marks)} cache_control blocks; Anthropic allows"
                f" {ANTHROPIC_MAX_BREAKPOINTS} (the request would be a 400)"
            )
        keys = self.keys(call)
        sizes = [0.0]
        for block in call.blocks:
            sizes.append(sizes[-1] + block.tokens)
        total = sizes[-1]
        position = -1
        for mark in marks:
            for candidate in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK), -1):
                entry = self.entries.get(keys[candidate])
                if entry is not None and entry.readable(call.at):
                    position = max(position, candidate)
                    break
        read = sizes[position + 1]
        if position >= 0:
            entry = self.entries[keys[position]]
            entry.expires = call.at + entry.ttl_s
        minimum = self.min_tokens(call.model)
        written_to = read
        write = write_1h = 0.0
        for mark in marks:
            size = sizes[mark + 1]
            if mark <= position or size < minimum:
                continue
            ttl = call.blocks[mark].breakpoint or "5m"
            if ttl not in ANTHROPIC_TTL_S:
                raise CacheRuleError(f"cache_control ttl {ttl!r}; Anthropic takes 5m or 1h")
            segment = size - written_to
            write += segment
            if ttl == "1h":
                write_1h += segment
            written_to = size
            ttl_s = ANTHROPIC_TTL_S[ttl]
            self.entries[keys[mark]] = _Entry(ready=call.done, expires=call.at + ttl_s, ttl_s=ttl_s)
        return charge(
            pricing,
            input_tokens=total,
            read=read,
            write=write,
            output=call.output_tokens,
            write_1h=write_1h,
        )


@dataclass
class IdealCache:
    """A prefix cache with no minimum, no write surcharge and no expiry: every call reads, at its
    model's read rate, the longest prefix an earlier call to the same model sent. Per model,
    because a prefix cache holds a model's own state of the prompt; no cache of any design can
    serve one model's call from another model's work, so a debate on two models pays each
    model's first read of the case in full, ideally too."""

    price_of: PriceOf
    texts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    schemas: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def bill(self, call: Call) -> Bill:
        pricing = self.price_of(call.vendor, call.model)
        model = (call.vendor, call.model)
        seen_schemas = self.schemas.setdefault(model, set())
        earlier_texts = self.texts.setdefault(model, [])
        read = 0.0
        for block in call.blocks:
            if block.part is Part.SCHEMA:
                if block.text in seen_schemas:
                    read += block.tokens
                seen_schemas.add(block.text)
        text = "".join(block.text for block in call.blocks if block.part is Part.TEXT)
        shared = max((common_prefix(text, earlier) for earlier in earlier_texts), default=0)
        read += estimate_tokens(text[:shared])
        earlier_texts.append(text)
        return charge(
            pricing, input_tokens=call.input_tokens, read=read, write=0.0, output=call.output_tokens
        )


def simulate(calls: Sequence[Call], price_of: PriceOf) -> tuple[list[Bill], list[Bill]]:
    """(vendor bills, ideal bills) of `calls`, in their order (which must be the order they
    started in), each vendor's cache fresh."""
    vendor: dict[str, OpenAICache | AnthropicCache] = {
        "openai": OpenAICache(price_of),
        "anthropic": AnthropicCache(price_of),
    }
    ideal = IdealCache(price_of)
    bills = [vendor[call.vendor].bill(call) for call in calls]
    return bills, [ideal.bill(call) for call in calls]
