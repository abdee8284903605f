"""A loopback stand-in for Anthropic's Messages API as documented in late 2026, for driving the
real `anthropic` SDK against the rules current Claude models enforce.

Each model id it serves has a `Profile`: the structured modes it takes, its thinking rules, its
effort levels, whether it takes sampling parameters or prefill, its minimum cacheable prompt.
What a profile does not allow is refused the way the API refuses it: a 400 with Anthropic's
error envelope and, where the docs give one, the documented message (MODEL_FACTS §1.3–§1.6,
§4.1). A model it does not serve (a retired one, a typo) is a 404 `not_found_error`.

Replies begin with an empty `thinking` block (the default `display: "omitted"`) when the model
thinks, then the answer: a `text` block for structured outputs and plain replies, a `tool_use`
block for a forced tool. The answer is the canned debate reply of its schema, else one filled
from the schema, with the bounds the client moved into descriptions put back (a model reads
them); for a protocol's envelope, the call's own type under the key its instructions name
(`envelopes.py`). Usage counts tokens as UTF-8 bytes / 4; `output_tokens` includes the
thinking, reported apart in `output_tokens_details.thinking_tokens`. Each prompt prefix marked
with `cache_control` is written to a cache, keyed on everything before it and on the thinking,
effort, tools and output format (changing those breaks a cache, per the docs); a request reads
the longest prefix written before that ends at a block boundary up to 20 blocks before one of
its marks. A structured-outputs schema with more than 16 union-typed parameters is refused.
With `stream: true` the reply is sent as the "Streaming Messages" page documents: server-sent
`message_start` (usage so far), per block `content_block_start`, its deltas (`text_delta`,
`input_json_delta`, `thinking_delta`/`signature_delta`) and `content_block_stop`, a `ping`,
`message_delta` (the `stop_reason` and the cumulative usage) and `message_stop`.
`refuse_streams` refuses a streamed request as a server that cannot stream would (400);
`cut_streams` cuts that many streams off after their first deltas (the connection closed).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import uuid
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from aiohttp import web

from engine.providers.fake import CANNED_DEBATE_REPLIES, fill_schema
from engine.providers.schemas import HINT
from tests.integration.envelopes import envelope_answer
from tests.integration.sse import anthropic_stream


class ThinkingRule(StrEnum):
    ADAPTIVE_ONLY = "adaptive_only"
    """Always thinks; `enabled` and `disabled` are a 400 (Opus 5.5, Sonnet 5.5, Fable 5.1)."""
    EXTENDED_ONLY = "extended_only"
    """Off unless `enabled` with a budget; `adaptive` is a 400 (the 4.5 generation)."""


EFFORTS = ("low", "medium", "high", "xhigh", "max")
THINKING_TOKENS = {"low": 40, "medium": 160, "high": 480, "xhigh": 960, "max": 1920}
"""Tokens the stand-in thinks per effort, so effort shows in the usage."""


@dataclass(frozen=True)
class Profile:
    """What one model accepts."""

    structured: frozenset[str]
    """`output_format` (`output_config.format`) and/or `tool` (a forced `tool_choice`)."""
    thinking: ThinkingRule
    efforts: tuple[str, ...]
    default_effort: str | None
    sampling: bool
    """Takes `temperature`/`top_p`/`top_k` (models before Opus 4.7)."""
    prefill: bool
    min_cacheable: int


CURRENT = Profile(
    structured=frozenset({"output_format"}),
    thinking=ThinkingRule.ADAPTIVE_ONLY,
    efforts=EFFORTS,
    default_effort="high",
    sampling=False,
    prefill=False,
    min_cacheable=512,
)
PROFILES: dict[str, Profile] = {
    # Anthropic, whats-new-opus-5-5: default effort medium; cacheable from 512 tokens.
    "claude-opus-5-5": replace(CURRENT, default_effort="medium"),
    "claude-sonnet-5-5": CURRENT,
    # Haiku 5.5 takes forced tools too (not among its breaking changes); "manual extended
    # thinking returns an error" (whats-new-haiku-5-5). Whether `disabled` is accepted is
    # known only from a third party; the stand-in refuses it, as on Opus 5.5.
    "claude-haiku-5-5": replace(
        CURRENT, structured=frozenset({"output_format", "tool"}), default_effort="medium"
    ),
    # An older model: structured outputs and forced tools, extended thinking only, no effort
    # (models overview: Haiku 4.5 effort "Not supported"), sampling and prefill accepted.
    "claude-haiku-4-5": Profile(
        structured=frozenset({"tool", "output_format"}),
        thinking=ThinkingRule.EXTENDED_ONLY,
        efforts=(),
        default_effort=None,
        sampling=True,
        prefill=True,
        min_cacheable=4096,
    ),
}
GATEWAY = Profile(
    structured=frozenset({"tool"}),
    thinking=ThinkingRule.EXTENDED_ONLY,
    efforts=(),
    default_effort=None,
    sampling=True,
    prefill=True,
    min_cacheable=1024,
)
"""A Claude model behind a gateway alias the model catalogue does not know, which passes forced
tools through but not structured outputs or effort (add it as `PROFILES` under any id)."""

# The documented 400 messages (MODEL_FACTS §1.3, §1.5, §4.1).
FORCED_TOOL = 'tool_choice: type "tool" and "any" are not supported for this model.'
THINKING_TYPE = (
    '"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and'
    ' "output_config.effort" to control thinking behavior.'
)
NO_ADAPTIVE = "adaptive thinking is not supported on this model"
FORCED_TOOL_THINKING = "Thinking may not be enabled when tool_choice forces tool use."
SAMPLING = "`{name}` is deprecated for this model."
# Not documented word for word; worded like the documented ones.
NO_OUTPUT_FORMAT = "output_config.format: structured outputs are not supported on this model."
NO_EFFORT = "output_config.effort: effort is not supported on this model."
PREFILL = (
    "This model does not support assistant message prefill. The conversation must end with a"
    " user turn."
)

TOP_LEVEL = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "cache_control",
        "service_tier",
        "temperature",
        "top_p",
        "top_k",
    }
)
REFUSED_KEYWORDS = ("minLength", "maxLength", "minimum", "maximum")
MAX_UNIONS = 16
TOO_MANY_UNIONS = (
    "Schemas contains too many parameters with union types ({count} parameters with type arrays"
    " or anyOf) which exceeds the limit: 16"
)
"""The refusal of a structured-outputs schema with more union-typed parameters than the limit
(the wording quoted by several third parties; the limit is in Anthropic's structured-outputs
page)."""
_HINT = re.compile(re.escape(HINT) + r"(\{.*\})\)$")


class Refusal(Exception):
    """A request the API refuses: status, error type, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def invalid(message: str) -> Refusal:
    return Refusal(400, "invalid_request_error", message)


def tokens(value: Any) -> int:
    """The stand-in's tokenizer: UTF-8 bytes / 4, rounded up."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return math.ceil(len(text.encode("utf-8")) / 4)


def schema_problems(node: Any, path: str = "schema") -> list[str]:
    """What the structured-outputs limits refuse in `node` (Anthropic, structured-outputs:
    every object `additionalProperties: false`; no minLength/maxLength/minimum/maximum;
    minItems only 0 or 1; no external `$ref`)."""
    problems: list[str] = []
    if isinstance(node, list):
        for index, item in enumerate(node):
            problems += schema_problems(item, f"{path}.{index}")
        return problems
    if not isinstance(node, dict):
        return problems
    if node.get("type") == "object" and node.get("additionalProperties") is not False:
        problems.append(f"{path}: objects must set additionalProperties to false")
    for keyword in REFUSED_KEYWORDS:
        if keyword in node:
            problems.append(f"{path}: {keyword} is not supported")
    if node.get("minItems", 0) not in (0, 1):
        problems.append(f"{path}: minItems values other than 0 or 1 are not supported")
    if isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#"):
        problems.append(f"{path}: external $ref is not supported")
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                problems += schema_problems(sub, f"{path}.{key}.{name}")
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "not"):
            problems += schema_problems(value, f"{path}.{key}")
    return problems


def union_count(node: Any) -> int:
    """The parameters of `node` typed as a union (`anyOf`, `oneOf` or a list of types)."""
    if isinstance(node, list):
        return sum(union_count(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = "anyOf" in node or "oneOf" in node or isinstance(node.get("type"), list)
    return int(own) + sum(union_count(value) for value in node.values())


def with_hints(node: Any) -> Any:
    """`node` with the bounds a description says it "must also satisfy" put back, as a model
    reading the schema would follow them."""
    if isinstance(node, list):
        return [with_hints(item) for item in node]
    if not isinstance(node, dict):
        return node
    restored = {key: with_hints(value) for key, value in node.items()}
    match = _HINT.search(str(node.get("description", "")))
    if match:
        restored.update(json.loads(match.group(1)))
    return restored


def answer_for(schema: dict[str, Any] | None, *, name: str = "", seed: str = "") -> Any:
    """The answer a diligent model gives: the canned debate reply of the schema (by tool name,
    else by its exact fields), else a value filled from the schema and its hints."""
    if name in CANNED_DEBATE_REPLIES:
        return dict(CANNED_DEBATE_REPLIES[name])
    if schema is None:
        return {}
    fields = set(schema.get("properties", {}))
    for reply in CANNED_DEBATE_REPLIES.values():
        if fields and set(reply) == fields:
            return dict(reply)
    return fill_schema(with_hints(schema), seed=seed or json.dumps(schema, sort_keys=True))


@dataclass
class Exchange:
    """One request and what the stand-in answered."""

    body: dict[str, Any]
    status: int
    answer: dict[str, Any]

    @property
    def refused(self) -> bool:
        return self.status != 200


@dataclass
class AnthropicStandIn:
    """The server. `exchanges` lists every request with its answer."""

    profiles: dict[str, Profile] = field(default_factory=lambda: dict(PROFILES))
    exchanges: list[Exchange] = field(default_factory=list)
    url: str = ""
    refuse_streams: bool = False
    cut_streams: int = 0
    _cache: set[str] = field(default_factory=set)
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def served(self, model: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.body.get("model") == model]

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        try:
            if body.get("stream") and self.refuse_streams:
                raise invalid("stream: streaming is not supported by this server")
            status, answer = 200, self.answer(body)
        except Refusal as refusal:
            status = refusal.status
            answer = {
                "type": "error",
                "error": {"type": refusal.kind, "message": refusal.message},
                "request_id": request_id,
            }
        self.exchanges.append(Exchange(body=body, status=status, answer=answer))
        if status == 200 and body.get("stream"):
            cut = 4 if self.cut_streams else None
            self.cut_streams = max(0, self.cut_streams - 1)
            return await anthropic_stream(
                request, answer, headers={"request-id": request_id}, cut=cut
            )
        return web.json_response(answer, status=status, headers={"request-id": request_id})

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply to `body`, or the Refusal the API would give."""
        for key in body:
            if key not in TOP_LEVEL:
                raise invalid(f"{key}: Extra inputs are not permitted")
        model = str(body.get("model", ""))
        profile = self.profiles.get(model)
        if profile is None:
            raise Refusal(404, "not_found_error", f"model: {model}")
        for key in ("max_tokens", "messages"):
            if key not in body:
                raise invalid(f"{key}: Field required")
        for name in ("temperature", "top_p", "top_k"):
            if name in body and not profile.sampling:
                # Anthropic, whats-new-opus-5-5: non-default sampling on Opus 4.7+ → 400.
                raise invalid(SAMPLING.format(name=name))
        thinks = self._thinking(body, profile)
        config = body.get("output_config") or {}
        effort = config.get("effort")
        if effort is not None and effort not in profile.efforts:
            raise invalid(
                NO_EFFORT
                if not profile.efforts
                else f"output_config.effort: Input should be {', '.join(profile.efforts)}"
            )
        mode = self._mode(body, profile, thinks)
        messages = body["messages"]
        if messages and messages[-1].get("role") == "assistant" and not profile.prefill:
            raise invalid(PREFILL)
        marks = json.dumps(body).count('"cache_control"')
        if marks > 4:
            raise invalid(
                f"A maximum of 4 blocks with cache_control may be provided. Found {marks}."
            )
        return self._reply(body, profile, mode, thinks, effort or profile.default_effort)

    @staticmethod
    def _thinking(body: dict[str, Any], profile: Profile) -> bool:
        """Whether the model thinks on `body`, or the refusal of its `thinking`."""
        kind = (body.get("thinking") or {}).get("type")
        if profile.thinking is ThinkingRule.ADAPTIVE_ONLY:
            if kind in ("enabled", "disabled"):
                raise invalid(THINKING_TYPE.format(kind=kind))
            return True
        if kind == "adaptive":
            raise invalid(NO_ADAPTIVE)
        return kind == "enabled"

    @staticmethod
    def _mode(body: dict[str, Any], profile: Profile, thinks: bool) -> str:
        choice = (body.get("tool_choice") or {}).get("type")
        forced = choice in ("tool", "any")
        if forced and "tool" not in profile.structured:
            raise invalid(FORCED_TOOL)
        if forced and thinks and profile.thinking is ThinkingRule.EXTENDED_ONLY:
            raise invalid(FORCED_TOOL_THINKING)
        fmt = (body.get("output_config") or {}).get("format")
        if fmt is not None:
            if "output_format" not in profile.structured:
                raise invalid(NO_OUTPUT_FORMAT)
            if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
                raise invalid("output_config.format: expected type json_schema with a schema")
            problems = schema_problems(fmt["schema"], "output_config.format.schema")
            if problems:
                raise invalid("; ".join(problems))
            unions = union_count(fmt["schema"])
            if unions > MAX_UNIONS:
                raise invalid(TOO_MANY_UNIONS.format(count=unions))
            return "output_format"
        return "tool" if forced else "text"

    def _reply(
        self,
        body: dict[str, Any],
        profile: Profile,
        mode: str,
        thinks: bool,
        effort: str | None,
    ) -> dict[str, Any]:
        prompt = [*_system_blocks(body), *_message_blocks(body)]
        seed = hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:16]
        said = "\n".join(str(block.get("text", "")) for block in prompt)

        def own(name: str, schema: dict[str, Any] | None) -> Any:
            return answer_for(schema, name=name, seed=seed)

        if mode == "tool":
            tool = next(t for t in body["tools"] if t["name"] == body["tool_choice"]["name"])
            answer = envelope_answer(tool["input_schema"], said, own)
            if answer is None:
                answer = answer_for(tool["input_schema"], name=tool["name"], seed=seed)
        else:
            fmt = (body.get("output_config") or {}).get("format") or {}
            answer = envelope_answer(fmt["schema"], said, own) if fmt.get("schema") else None
            if answer is None:
                answer = answer_for(fmt.get("schema"), seed=seed)
        thinking = THINKING_TOKENS[effort or "high"] if thinks else 0
        budget = int(body["max_tokens"])
        content: list[dict[str, Any]] = []
        if thinks:
            content.append({"type": "thinking", "thinking": "", "signature": f"sig_{seed}"})
        text = json.dumps(answer)
        visible = tokens(text)
        stop = "tool_use" if mode == "tool" else "end_turn"
        if thinking >= budget:
            thinking, visible, stop = budget, 0, "max_tokens"
        elif thinking + visible > budget:
            visible, stop = budget - thinking, "max_tokens"
            text = text[: visible * 4]
        if visible:
            if mode == "tool" and stop == "tool_use":
                content.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{seed}",
                        "name": body["tool_choice"]["name"],
                        "input": answer,
                    }
                )
            else:
                content.append({"type": "text", "text": text})
        read, write, uncached = self._cached(body, profile, thinks, effort, prompt)
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": uncached,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
                "output_tokens": thinking + visible,
                "output_tokens_details": {"thinking_tokens": thinking},
            },
        }

    def _cached(
        self,
        body: dict[str, Any],
        profile: Profile,
        thinks: bool,
        effort: str | None,
        prompt: list[dict[str, Any]],
    ) -> tuple[int, int, int]:
        """(cache read, cache write, uncached input) tokens of `body`. Each `cache_control` mark
        writes the prefix up to it, when long enough; the longest prefix written before that
        ends at a block boundary up to 20 blocks before a mark is read ("the system checks for
        cache hits at all previous content block boundaries, up to 20 blocks before the
        breakpoint"). Keyed on the model, the thinking, the effort, the tools and the format."""
        extras = [
            part
            for part in (body.get("tools"), (body.get("output_config") or {}).get("format"))
            if part is not None
        ]
        overhead = tokens(extras) if extras else 0
        sizes = list(
            itertools.accumulate((tokens(block.get("text", block)) for block in prompt), initial=0)
        )
        total = sizes[-1] + overhead
        marked = [i for i, block in enumerate(prompt) if "cache_control" in block]
        if not marked:
            return 0, 0, total
        plain = [{k: v for k, v in block.items() if k != "cache_control"} for block in prompt]

        def key(end: int) -> str:
            head = [body["model"], thinks, effort, extras, plain[: end + 1]]
            return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()

        window = {j for mark in marked for j in range(max(0, mark - 19), mark + 1)}
        hits = [sizes[j + 1] + overhead for j in window if key(j) in self._cache]
        read = max(hits, default=0)
        written = [m for m in marked if sizes[m + 1] + overhead >= profile.min_cacheable]
        for mark in written:
            self._cache.add(key(mark))
        write = max(0, sizes[written[-1] + 1] + overhead - read) if written else 0
        return read, write, total - read - write


def _system_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body.get("system")
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}]
    return list(system)


def _message_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content, "role": message["role"]})
        else:
            blocks.extend({**block, "role": message["role"]} for block in content)
    return blocks
