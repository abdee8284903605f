"""A scriptable model server on 127.0.0.1 speaking OpenAI's chat completions and Anthropic's
Messages API, for fault injection against the real SDKs (it enforces no vendor's rules; the
Anthropic stand-in, `anthropic_standin.py`, does).

Each endpoint answers from a queue of `Step`s (a status, headers, a hang, or a reply text);
when the queue is empty it answers correctly: the canned debate reply for a schema that has one,
else a reply filled from the requested schema (`fill_schema`), so every protocol can run against
it; a request with `stream` is answered as its vendor streams (`sse.py`). `delay_s` adds a
fixed latency to every answer, like a hosted model's; `busy_s` (and GET /stats) sums the time
spent answering. Every request is recorded with its headers and JSON body.

Run alone (benchmarks do, so the server's work stays out of the measured process):

    python -m tests.integration.llm_server --delay 0.2     # prints its URL, serves until killed
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from engine.providers.fake import CANNED_DEBATE_REPLIES, fill_schema
from tests.integration.anthropic_standin import answer_for
from tests.integration.envelopes import asked_key, envelope_answer, type_name
from tests.integration.sse import anthropic_stream, openai_stream


@dataclass
class Step:
    """One scripted answer: an error status, a hang, or a reply text (default: the canned one)."""

    status: int = 200
    error: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0
    text: str | None = None
    finish: str | None = None


@dataclass
class Recorded:
    api: str
    headers: dict[str, str]
    body: dict[str, Any]


OPENAI_USAGE = {"prompt_tokens": 1_000, "completion_tokens": 100, "cached_tokens": 600}
ANTHROPIC_USAGE = {
    "input_tokens": 200,
    "output_tokens": 100,
    "read": 700,
    "write": 100,
    "thinking": 40,
}
"""`thinking` is the part of `output_tokens` reported as thinking when the request thinks."""


def anthropic_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of an Anthropic request's `output_config.format` (structured outputs)."""
    fmt = (body.get("output_config") or {}).get("format") or {}
    schema = fmt.get("schema")
    return dict(schema) if isinstance(schema, dict) else None


def prompt_of(api: str, body: dict[str, Any]) -> str:
    """Every text of the request's prompt, in order."""
    texts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        texts.append(system)
    elif isinstance(system, list):
        texts += [str(block.get("text", "")) for block in system]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            texts += [str(block.get("text", "")) for block in content]
        else:
            texts.append(str(content or ""))
    return "\n".join(texts)


def schema_name(api: str, body: dict[str, Any]) -> str:
    """The requested output type: the one the instructions name for a protocol's envelope, the
    tool or json_schema name, else the canned reply whose fields the json_object or
    output_config schema lists."""
    key = asked_key(prompt_of(api, body))
    if key is not None:
        return type_name(key)
    if api == "anthropic":
        if body.get("tools"):
            return str(body["tools"][0]["name"])
        fmt: dict[str, Any] = {"schema": anthropic_format(body) or {}}
    else:
        fmt = body.get("response_format") or {}
    if "json_schema" in fmt:
        return str(fmt["json_schema"].get("name", ""))
    fields = set(fmt.get("schema", {}).get("properties", {}))
    for name, reply in CANNED_DEBATE_REPLIES.items():
        if fields and set(reply) <= fields:
            return name
    return ""


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema an OpenAI-style request asks its reply to follow, if any."""
    fmt = body.get("response_format") or {}
    if "json_schema" in fmt:
        return dict(fmt["json_schema"].get("schema") or {})
    return fmt.get("schema")


def reply_for(name: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The canned reply of the output type `name`, else one filled from `schema`."""
    if name in CANNED_DEBATE_REPLIES:
        return dict(CANNED_DEBATE_REPLIES[name])
    if schema is None:
        return {}
    filled: dict[str, Any] = fill_schema(schema, seed=name)
    return filled


class ModelServer:
    """The server; `script(api, *steps)` queues answers, `requests` lists what arrived."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.busy_s = 0.0
        """Seconds spent answering model requests (the delay and the server's own work): the
        model's latency as the server saw it."""
        self.queues: dict[str, deque[Step]] = {"openai": deque(), "anthropic": deque()}
        self.requests: list[Recorded] = []
        self.fail_schema: dict[str, Step] = {}
        self._runner: web.AppRunner | None = None
        self.url = ""

    def script(self, api: str, *steps: Step) -> None:
        self.queues[api].extend(steps)

    def always_fail(self, schema: str, step: Step) -> None:
        """Answer every request for `schema` with `step` (an outage hitting one role)."""
        self.fail_schema[schema] = step

    async def start(self) -> str:
        app = web.Application(middlewares=[self._timed])
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_get("/stats", self._stats)
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

    @web.middleware
    async def _timed(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            if request.path.startswith("/v1/"):
                self.busy_s += time.perf_counter() - started

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.json_response({"requests": len(self.requests), "busy_s": self.busy_s})

    async def _next(self, api: str, request: web.Request) -> tuple[dict[str, Any], Step]:
        body = await request.json()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(Recorded(api=api, headers=headers, body=body))
        name = schema_name(api, body)
        if name in self.fail_schema:
            return body, self.fail_schema[name]
        queue = self.queues[api]
        return body, (queue.popleft() if queue else Step())

    @staticmethod
    async def _failure(step: Step, api: str) -> web.Response | None:
        if step.hang_s:
            await asyncio.sleep(step.hang_s)
        if step.status == 200:
            return None
        if api == "anthropic":
            payload = {"type": "error", "error": {"type": "api_error", "message": step.error}}
        else:
            payload = {"error": {"message": step.error, "type": "server_error", "code": None}}
        return web.json_response(payload, status=step.status, headers=step.headers)

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        body, step = await self._next("openai", request)
        failure = await self._failure(step, "openai")
        if failure is not None:
            return failure
        text = step.text
        if text is None:
            schema = requested_schema(body)
            wrapped = (
                envelope_answer(schema, prompt_of("openai", body), reply_for) if schema else None
            )
            answer = (
                wrapped if wrapped is not None else reply_for(schema_name("openai", body), schema)
            )
            text = json.dumps(answer)
        usage = OPENAI_USAGE
        answer = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": step.finish or "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
                "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]},
            },
        }
        if body.get("stream"):
            return await openai_stream(request, body, answer)
        return web.json_response(answer)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        body, step = await self._next("anthropic", request)
        failure = await self._failure(step, "anthropic")
        if failure is not None:
            return failure
        name = schema_name("anthropic", body)
        thinks = bool(body.get("thinking"))
        content: list[dict[str, Any]] = []
        if thinks:
            content.append({"type": "thinking", "thinking": "", "signature": "sig-loopback"})
        if step.text is not None:
            content.append({"type": "text", "text": step.text})
        elif body.get("tools"):
            tool = body["tools"][0]
            answer = envelope_answer(
                tool.get("input_schema") or {}, prompt_of("anthropic", body), reply_for
            )
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:20]}",
                    "name": tool["name"],
                    "input": answer
                    if answer is not None
                    else reply_for(name, tool.get("input_schema")),
                }
            )
        else:
            schema = anthropic_format(body)
            answer = (
                envelope_answer(schema, prompt_of("anthropic", body), reply_for) if schema else None
            )
            if answer is None:
                answer = answer_for(schema, name=name)
            content.append({"type": "text", "text": json.dumps(answer)})
        usage = ANTHROPIC_USAGE
        tool_call = content[-1]["type"] == "tool_use"
        answer = {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": step.finish or ("tool_use" if tool_call else "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage["input_tokens"],
                "output_tokens": usage["output_tokens"],
                "cache_read_input_tokens": usage["read"],
                "cache_creation_input_tokens": usage["write"],
                "output_tokens_details": {"thinking_tokens": usage["thinking"] if thinks else 0},
            },
        }
        if body.get("stream"):
            return await anthropic_stream(request, answer, headers={})
        return web.json_response(answer)


async def _serve_forever(delay_s: float) -> None:
    server = ModelServer(delay_s=delay_s)
    sys.stdout.write(await server.start() + "\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="the loopback model server, alone")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to every answer")
    asyncio.run(_serve_forever(parser.parse_args().delay))
