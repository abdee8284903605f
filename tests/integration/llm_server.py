"""A scriptable model server on 127.0.0.1 speaking OpenAI's chat completions and Anthropic's
Messages API, for fault injection against the real SDKs.

Each endpoint answers from a queue of `Step`s (a status, headers, a hang, or a reply text);
when the queue is empty it answers correctly with the canned debate reply for the requested
schema. Every request is recorded with its headers and JSON body.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from engine.providers.fake import CANNED_DEBATE_REPLIES


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
ANTHROPIC_USAGE = {"input_tokens": 200, "output_tokens": 100, "read": 700, "write": 100}


def schema_name(api: str, body: dict[str, Any]) -> str:
    """The requested output type: the tool or json_schema name, else the canned reply whose
    fields the json_object schema lists."""
    if api == "anthropic":
        return str(body["tools"][0]["name"]) if body.get("tools") else ""
    fmt = body.get("response_format") or {}
    if "json_schema" in fmt:
        return str(fmt["json_schema"].get("name", ""))
    fields = set(fmt.get("schema", {}).get("properties", {}))
    for name, reply in CANNED_DEBATE_REPLIES.items():
        if fields and set(reply) <= fields:
            return name
    return ""


class ModelServer:
    """The server; `script(api, *steps)` queues answers, `requests` lists what arrived."""

    def __init__(self) -> None:
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
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
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

    async def _next(self, api: str, request: web.Request) -> tuple[dict[str, Any], Step]:
        body = await request.json()
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

    async def _openai(self, request: web.Request) -> web.Response:
        body, step = await self._next("openai", request)
        failure = await self._failure(step, "openai")
        if failure is not None:
            return failure
        text = step.text
        if text is None:
            text = json.dumps(CANNED_DEBATE_REPLIES[schema_name("openai", body)])
        usage = OPENAI_USAGE
        return web.json_response(
            {
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
        )

    async def _anthropic(self, request: web.Request) -> web.Response:
        body, step = await self._next("anthropic", request)
        failure = await self._failure(step, "anthropic")
        if failure is not None:
            return failure
        name = schema_name("anthropic", body)
        if step.text is None:
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:20]}",
                    "name": name,
                    "input": CANNED_DEBATE_REPLIES[name],
                }
            ]
        else:
            content = [{"type": "text", "text": step.text}]
        usage = ANTHROPIC_USAGE
        return web.json_response(
            {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": step.finish or ("tool_use" if step.text is None else "end_turn"),
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage["input_tokens"],
                    "output_tokens": usage["output_tokens"],
                    "cache_read_input_tokens": usage["read"],
                    "cache_creation_input_tokens": usage["write"],
                },
            }
        )
