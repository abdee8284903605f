"""A loopback stand-in for OpenAI's Chat Completions that enforces each model's documented
request rules (as of late 2026), so the real `openai` SDK can be driven against it.

Per model (`Profile`), it refuses what OpenAI refuses, with OpenAI's error envelope
`{"error": {"message", "type", "param", "code"}}`:
- `max_tokens` on a reasoning model: 400 `unsupported_parameter` ("Use 'max_completion_tokens'
  instead");
- `temperature` other than the default 1 on a reasoning model, unless its effort is `none` and
  it offers `none` ("When reasoning effort is not none, remove `temperature`…"): 400
  `unsupported_value`;
- `reasoning_effort` outside the model's levels: 400 `unsupported_value`, and on a model
  without reasoning: 400 `unsupported_parameter`;
- a strict `json_schema` whose schema strict mode refuses (length and size keywords, an object
  without `additionalProperties: false` or with fields missing from `required`), a schema name
  outside `^[a-zA-Z0-9_-]{1,64}$`, and `json_schema` itself on a model without structured
  outputs; `json_object` without the word "json" in the messages;
- an unknown model: 404 `model_not_found`; a request argument the SDK does not define: 400;
  no bearer key: 401.
Its replies fill the requested schema (`reply_for` of llm_server, from the full schema of the
engine's output type the strict one was derived from, since a model reads the prompt's limits);
for a protocol's envelope, the call's own type under the key its instructions name, the other
keys null (`envelopes.py`); in JSON mode without a schema, the output type whose field list the
prompt carries.
Usage follows the documented shape: `prompt_tokens` counts every prompt token, of them
`prompt_tokens_details.cached_tokens` read from the cache (a prefix seen before, 1,024 tokens or
more, in 128-token steps) and `cache_write_tokens` written to it (gpt-5.6 and later);
`completion_tokens` counts the reasoning tokens (`completion_tokens_details.reasoning_tokens`,
more with a higher effort) and is capped by the request's limit (`finish_reason` `length`).
Tokens are counted as four bytes each.
Streaming follows the Chat Completions reference: `stream: true` answers `text/event-stream`,
the content in `chat.completion.chunk` deltas, the last choice chunk with its `finish_reason`,
then (with `stream_options.include_usage`) one chunk with the usage and no choices, then
`data: [DONE]`; `stream_options` without `stream` is refused (400, param `stream_options`).
`refuse_streams` answers a streamed request as a server that cannot stream does (400, param
`stream`); `streams_without_usage` streams whole replies but ignores
`stream_options.include_usage`, as some OpenAI-compatible servers do; `cut_streams` cuts that
many streams off after their first chunks (the connection
closed mid-body, no usage, no `[DONE]`).
"""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsBase,
    CompletionCreateParamsStreaming,
)

import engine.protocols  # noqa: F401  (defines every protocol's output types)
from engine.llm import describe_output, output_schema
from engine.providers.schemas import strict_schema
from tests.integration.envelopes import engine_types, envelope_answer
from tests.integration.llm_server import reply_for
from tests.integration.sse import openai_stream

REASONING_TOKENS = {
    "none": 0,
    "minimal": 16,
    "low": 64,
    "medium": 192,
    "high": 512,
    "xhigh": 1_024,
    "max": 2_048,
}
"""Tokens spent reasoning per effort level (the amounts are the stand-in's own)."""
STRICT_REFUSED = ("minLength", "maxLength", "minItems", "maxItems")
ARGUMENTS = frozenset(CompletionCreateParamsBase.__annotations__) | frozenset(
    CompletionCreateParamsStreaming.__annotations__
)
"""The request arguments the installed SDK defines; OpenAI refuses any other."""
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Profile:
    """What one model takes, as OpenAI documents it."""

    efforts: tuple[str, ...] = ()
    """Its `reasoning_effort` levels; none for a model that does not reason."""
    default_effort: str | None = None
    takes_max_tokens: bool = False
    """Only models without reasoning still take the deprecated `max_tokens`."""
    structured_outputs: bool = True
    cache_writes: bool = False
    """gpt-5.6 and later report (and bill) the prompt tokens written to the cache."""

    @property
    def reasons(self) -> bool:
        return bool(self.efforts)


PROFILES: dict[str, Profile] = {
    # https://developers.openai.com/api/docs/models/gpt-6.2-sol: "The API rejects requests that
    # set reasoning effort to none", so no temperature either.
    "gpt-6.2-sol": Profile(
        efforts=("low", "medium", "high", "xhigh", "max"),
        default_effort="medium",
        cache_writes=True,
    ),
    # https://developers.openai.com/api/docs/models/gpt-6-luna: none..max, default medium.
    "gpt-6-luna": Profile(
        efforts=("none", "low", "medium", "high", "xhigh", "max"),
        default_effort="medium",
        cache_writes=True,
    ),
    # gpt-4.1: no reasoning, any temperature, either token field (shut down 2027-01-14).
    "gpt-4.1": Profile(takes_max_tokens=True),
}


@dataclass
class Exchange:
    """One request as the stand-in received it, and its answer's status and usage."""

    model: str
    body: dict[str, Any]
    status: int = 200
    param: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class Refusal(Exception):
    """An answer with OpenAI's error envelope."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def response(self) -> web.Response:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        body = {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.code,
            }
        }
        return web.json_response(body, status=self.status)


def unsupported_parameter(name: str, instead: str = "") -> Refusal:
    message = f"Unsupported parameter: '{name}' is not supported with this model."
    if instead:
        message += f" Use '{instead}' instead."
    return Refusal(400, message, param=name, code="unsupported_parameter")


def strict_problem(schema: Any, context: tuple[str, ...] = ()) -> str | None:
    """Why OpenAI's strict mode refuses `schema`, in its words, or None."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            problem = strict_problem(item, (*context, str(index)))
            if problem:
                return problem
        return None
    if not isinstance(schema, dict):
        return None
    for keyword in STRICT_REFUSED:
        if keyword in schema:
            return f"In context={context}, '{keyword}' is not permitted."
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            return (
                f"In context={context}, 'additionalProperties' is required to be supplied and"
                " to be false."
            )
        missing = [key for key in schema.get("properties", {}) if key not in schema["required"]]
        if missing:
            return (
                f"In context={context}, 'required' is required to be supplied and to be an"
                f" array including every key in properties. Missing '{missing[0]}'."
            )
    for key, value in schema.items():
        if key in ("enum", "const", "required"):
            continue
        problem = strict_problem(value, (*context, key))
        if problem:
            return problem
    return None


@functools.lru_cache(maxsize=128)
def _full_schema(name: str, strict: str) -> dict[str, Any] | None:
    """The schema of the engine output type named `name` whose strict form is `strict`."""
    for kind in engine_types():
        if kind.__name__ != name:
            continue
        schema = output_schema(kind)
        if json.dumps(strict_schema(schema), sort_keys=True) == strict:
            return schema
    return None


def described_type(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """The output type whose field list (`describe_output`) the prompt carries, the longest
    when several do: what a model asked for JSON without a schema goes by."""
    said = "\n".join(str(m.get("content", "")) for m in messages)
    best: tuple[str, dict[str, Any] | None] = ("", None)
    longest = 0
    for kind in engine_types():
        try:
            described = describe_output(kind)
        except (KeyError, TypeError, ValueError):
            continue
        if described and described in said and len(described) > longest:
            best, longest = (kind.__name__, output_schema(kind)), len(described)
    return best


def tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


class OpenAIStandIn:
    """The server; `profiles` may be extended before a test, `exchanges` lists what arrived."""

    def __init__(self, profiles: dict[str, Profile] | None = None) -> None:
        self.profiles = dict(PROFILES if profiles is None else profiles)
        self.exchanges: list[Exchange] = []
        self._prompts: dict[str, list[str]] = {}
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.refuse_streams = False
        self.cut_streams = 0
        self.streams_without_usage = False

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
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

    def of(self, model: str, *, status: int | None = None) -> list[Exchange]:
        """The exchanges with `model`, those answered with `status` if given."""
        return [e for e in self.exchanges if e.model == model and status in (None, e.status)]

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return Refusal(400, "We could not parse the JSON body of your request.").response()
        exchange = Exchange(model=str(body.get("model", "")), body=body)
        self.exchanges.append(exchange)
        try:
            if not request.headers.get("Authorization", "").startswith("Bearer "):
                raise Refusal(401, "You didn't provide an API key.")
            if body.get("stream_options") is not None and not body.get("stream"):
                raise Refusal(
                    400,
                    "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                    param="stream_options",
                )
            if body.get("stream") and self.refuse_streams:
                raise Refusal(400, "Streaming is not supported for this model.", param="stream")
            answer = self._answer(body, exchange)
        except Refusal as refusal:
            exchange.status, exchange.param = refusal.status, refusal.param
            return refusal.response()
        if body.get("stream"):
            cut = 2 if self.cut_streams else None
            self.cut_streams = max(0, self.cut_streams - 1)
            return await openai_stream(
                request, body, answer, cut=cut, usage=not self.streams_without_usage
            )
        return web.json_response(answer)

    def _answer(self, body: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
        unknown = sorted(set(body) - ARGUMENTS)
        if unknown:
            raise Refusal(400, f"Unrecognized request argument supplied: {unknown[0]}")
        model = exchange.model
        profile = self.profiles.get(model)
        if profile is None:
            raise Refusal(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        effort = self._effort(body, profile)
        limit = self._limit(body, profile)
        self._temperature(body, profile, effort)
        name, schema = self._format(body, profile)
        said = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        wrapped = envelope_answer(schema, said, reply_for) if schema else None
        text = json.dumps(wrapped if wrapped is not None else reply_for(name, schema))
        return self._completion(body, profile, effort, limit, text, exchange)

    @staticmethod
    def _limit(body: dict[str, Any], profile: Profile) -> int | None:
        if "max_tokens" in body and not profile.takes_max_tokens:
            raise unsupported_parameter("max_tokens", "max_completion_tokens")
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        return int(limit) if limit is not None else None

    @staticmethod
    def _effort(body: dict[str, Any], profile: Profile) -> str | None:
        effort = body.get("reasoning_effort")
        if effort is None:
            return profile.default_effort
        if not profile.reasons:
            raise unsupported_parameter("reasoning_effort")
        if effort not in profile.efforts:
            supported = ", ".join(f"'{level}'" for level in profile.efforts)
            raise Refusal(
                400,
                f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this"
                f" model. Supported values are: {supported}.",
                param="reasoning_effort",
                code="unsupported_value",
            )
        return str(effort)

    @staticmethod
    def _temperature(body: dict[str, Any], profile: Profile, effort: str | None) -> None:
        temperature = body.get("temperature")
        if temperature is None or not profile.reasons or temperature == 1:
            return
        if effort == "none":
            return
        raise Refusal(
            400,
            f"Unsupported value: 'temperature' does not support {temperature} with this model."
            " Only the default (1) value is supported.",
            param="temperature",
            code="unsupported_value",
        )

    @staticmethod
    def _format(body: dict[str, Any], profile: Profile) -> tuple[str, dict[str, Any] | None]:
        """The output type's name and the schema to fill, after OpenAI's checks."""
        fmt = body.get("response_format") or {}
        kind = fmt.get("type")
        if kind == "json_schema":
            if not profile.structured_outputs:
                raise Refusal(
                    400,
                    "Invalid parameter: 'response_format' of type 'json_schema' is not"
                    " supported with this model. Learn more about supported models at the"
                    " Structured Outputs guide:"
                    " https://platform.openai.com/docs/guides/structured-outputs",
                    param="response_format",
                )
            spec = fmt.get("json_schema") or {}
            name = str(spec.get("name", ""))
            if not _NAME.match(name):
                raise Refusal(
                    400,
                    "Invalid 'response_format.json_schema.name': string does not match pattern."
                    " Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                    param="response_format.json_schema.name",
                    code="invalid_value",
                )
            schema = spec.get("schema") or {}
            if spec.get("strict") is True:
                problem = strict_problem(schema)
                if problem:
                    raise Refusal(
                        400,
                        f"Invalid schema for response_format '{name}': {problem}",
                        param="response_format",
                    )
            full = _full_schema(name, json.dumps(schema, sort_keys=True))
            return name, full or schema
        if kind == "json_object":
            said = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
            if "json" not in said.lower():
                raise Refusal(
                    400,
                    "'messages' must contain the word 'json' in some form, to use"
                    " 'response_format' of type 'json_object'.",
                    param="messages",
                )
            if fmt.get("schema"):
                return "", fmt["schema"]
        return described_type(body.get("messages", []))

    def _completion(
        self,
        body: dict[str, Any],
        profile: Profile,
        effort: str | None,
        limit: int | None,
        text: str,
        exchange: Exchange,
    ) -> dict[str, Any]:
        # The response format is a prefix of the prompt, before the messages.
        prompt = json.dumps(body.get("response_format")) + "".join(
            f"\n{m.get('role')}: {m.get('content')}" for m in body["messages"]
        )
        prompt_tokens = tokens(prompt)
        seen = self._prompts.setdefault(exchange.model, [])
        shared = max((_common_prefix(prompt, other) for other in seen), default=0)
        seen.append(prompt)
        cached = 0
        if prompt_tokens >= 1_024 and shared // 4 >= 1_024:
            cached = (shared // 4) // 128 * 128
        written = 0
        if profile.cache_writes and prompt_tokens >= 1_024:
            written = (prompt_tokens - cached) // 128 * 128
        reasoning = REASONING_TOKENS[effort] if effort is not None and profile.reasons else 0
        visible = tokens(text)
        finish = "stop"
        if limit is not None and reasoning + visible > limit:
            finish = "length"
            reasoning = min(reasoning, limit)
            text = text[: max(0, limit - reasoning) * 4]
            visible = tokens(text)
        prompt_details: dict[str, int] = {"cached_tokens": cached, "audio_tokens": 0}
        if profile.cache_writes:
            prompt_details["cache_write_tokens"] = written
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": reasoning + visible,
            "total_tokens": prompt_tokens + reasoning + visible,
            "prompt_tokens_details": prompt_details,
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        exchange.usage = usage
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": 1_795_000_000,
            "model": exchange.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            "service_tier": "default",
        }


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`, in bytes of `a`."""
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return len(a[:length].encode("utf-8"))
