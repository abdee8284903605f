"""The HTTP face of the bot: an ASGI app serving Slack at `/slack/events` and `/healthz`.

Before Bolt sees a request, the front door refuses with a 4xx what Bolt would answer with a
traceback: a missing or non-numeric `X-Slack-Request-Timestamp`, a body that is not UTF-8 or is
larger than Slack ever sends, a `payload=` that is not a JSON object, and a payload whose shape
no listener can use (`bot.slack.payloads`). Bolt still checks the signature of what passes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from slack_bolt.adapter.asgi.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp

from bot.metrics import CONTENT_TYPE, Metrics
from bot.slack import payloads

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
HealthCheck = Callable[[], Awaitable[dict[str, Any]]]

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 1_000_000
"""Slack's requests are a few kilobytes; a command's text is at most 4,000 characters and an
interaction payload carries at most a message's 50 blocks and a view's 100."""


class OpsASGI:
    """`/healthz` and `GET /metrics` alone, with no Slack route: what `serve` answers on its HTTP
    port in Socket Mode, where Slack's events arrive over the socket and are not signed, so
    `/slack/events` must not be reachable over HTTP."""

    def __init__(self, health: HealthCheck, metrics: Metrics | None = None) -> None:
        self.health = health
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if not await answer_ops(scope, send, self.health, self.metrics):
            await _answer(send, 404, "not found: this port serves /healthz and /metrics")


async def answer_ops(
    scope: Scope, send: Send, health: HealthCheck, metrics: Metrics | None
) -> bool:
    """Answer `/healthz` or `GET /metrics`; False for any other request."""
    if scope["path"] == "/healthz":
        report = await health()
        status = 200 if report.get("ok") else 503
        await _send(send, status, "application/json", json.dumps(report).encode())
        return True
    if metrics is not None and scope["path"] == "/metrics" and scope.get("method") == "GET":
        await _send(send, 200, CONTENT_TYPE, metrics.exposition())
        return True
    return False


async def _send(send: Send, status: int, content_type: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BotASGI:
    """Routes `/healthz` to the health check, `GET /metrics` to Prometheus' exposition and
    everything else to Bolt's request handler."""

    def __init__(self, app: AsyncApp, health: HealthCheck, metrics: Metrics | None = None) -> None:
        self.slack = AsyncSlackRequestHandler(app, path=EVENTS_PATH)
        self.health = health
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await answer_ops(scope, send, self.health, self.metrics):
            return
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.slack(scope, receive, send)  # type: ignore[arg-type]
            return
        body, refusal = await _read_checked(scope, receive)
        if refusal is not None:
            status, reason = refusal
            await _answer(send, status, reason)
            return
        delivered = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.slack(scope, replay, send)  # type: ignore[arg-type]


async def _read_checked(scope: Scope, receive: Receive) -> tuple[bytes, tuple[int, str] | None]:
    """The whole body, and (status, reason) when the request must be refused before Bolt."""
    headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers") or []}
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b"", (413, f"the request is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    timestamp = headers.get("x-slack-request-timestamp", b"").decode("latin-1")
    if not timestamp.strip().isdigit():
        return body, (401, "X-Slack-Request-Timestamp is missing or not a number")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body, (400, "the request body is not UTF-8")
    parsed: Any
    if b"application/json" in headers.get("content-type", b""):
        try:
            parsed = json.loads(text)
        except ValueError:
            return body, (400, "the body is not JSON")
    else:
        fields = parse_qs(text, keep_blank_values=True)
        if "payload" in fields:
            try:
                parsed = json.loads(fields["payload"][0])
            except ValueError:
                return body, (400, "payload is not JSON")
            if not isinstance(parsed, dict):
                return body, (400, "payload is not a JSON object")
        else:
            parsed = {key: values[0] for key, values in fields.items()}
    why = payloads.problem(parsed)
    if why is not None:
        log.warning("malformed Slack request refused: %s", why)
        return body, (400, f"malformed request: {why}")
    return body, None


async def _answer(send: Send, status: int, reason: str) -> None:
    await _send(send, status, "text/plain; charset=utf-8", reason.encode())
