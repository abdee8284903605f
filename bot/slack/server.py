"""The HTTP face of the bot: an ASGI app serving Slack at `/slack/events`, `/healthz`, and the
public keys decision receipts are verified with at `/.well-known/debatebot-keys.json`.

The front door authenticates before it parses: a request larger than Slack ever sends is cut
off while it is read, then its `X-Slack-Signature` (HMAC of the raw bytes and the timestamp,
within five minutes) is checked on those bytes, and only a request Slack signed is decoded and
parsed. So a forged body, however it is built (invalid UTF-8, JSON nested 100,000 levels deep),
costs a hash and gets a 401. What Slack did sign is still checked before Bolt sees it, since
Bolt would answer it with a traceback: a body that is not UTF-8, a `payload=` that is not a
JSON object, JSON nested deeper than Slack nests, and a payload whose shape no listener can use
(`bot.slack.payloads`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from slack_bolt.adapter.asgi.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp

from bot.fronts.asgi import Receive, Scope, Send, replaying
from bot.metrics import CONTENT_TYPE, Metrics
from bot.slack import payloads
from bot.slack.after_ack import AfterAck

HealthCheck = Callable[[], Awaitable[dict[str, Any]]]
PublicKeys = Callable[[], bytes | None]
"""The public keys file of the receipt keys, read at each request (None: there are none)."""
KEYS_PATH = "/.well-known/debatebot-keys.json"
MCP_PATH = "/mcp"
Mcp = Callable[[Scope, Receive, Send], Awaitable[None]]
"""MCP over Streamable HTTP (bot.fronts.mcp.http), served beside Slack when configured."""

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 1_000_000
"""Slack's requests are a few kilobytes; a command's text is at most 4,000 characters and an
interaction payload carries at most a message's 50 blocks and a view's 100."""


@dataclass(eq=False)
class OpsASGI:
    """`/healthz` and `GET /metrics` alone, with no Slack route: what `serve` answers on its HTTP
    port in Socket Mode, where Slack's events arrive over the socket and are not signed, so
    `/slack/events` must not be reachable over HTTP."""

    health: HealthCheck
    metrics: Metrics | None = None
    public_keys: PublicKeys | None = None
    mcp: Mcp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self.mcp is not None and scope["path"] == MCP_PATH:
            await self.mcp(scope, receive, send)
            return
        if not await answer_ops(scope, send, self.health, self.metrics, self.public_keys):
            await _answer(send, 404, "not found: this port serves /healthz and /metrics")


async def answer_ops(
    scope: Scope,
    send: Send,
    health: HealthCheck,
    metrics: Metrics | None,
    public_keys: PublicKeys | None = None,
) -> bool:
    """Answer `/healthz`, `GET /metrics` or `GET` of the receipt keys' public file; False for
    any other request."""
    if scope["path"] == "/healthz":
        report = await health()
        status = 200 if report.get("ok") else 503
        await _send(send, status, "application/json", json.dumps(report).encode())
        return True
    if metrics is not None and scope["path"] == "/metrics" and scope.get("method") == "GET":
        await _send(send, 200, CONTENT_TYPE, metrics.exposition())
        return True
    if public_keys is not None and scope["path"] == KEYS_PATH and scope.get("method") == "GET":
        # A small file, read in a thread so a slow disk never stalls Slack's requests.
        document = await asyncio.to_thread(public_keys)
        if document is None:
            await _answer(send, 404, "no receipt keys: this deployment signs no receipts")
        else:
            await _send(send, 200, "application/json", document)
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
    everything else to Bolt's request handler; while it answers a Slack request, the work after
    earlier acknowledgements waits its turn (`after_ack`)."""

    def __init__(
        self,
        app: AsyncApp,
        health: HealthCheck,
        metrics: Metrics | None = None,
        *,
        signing_secret: str,
        after_ack: AfterAck | None = None,
        public_keys: PublicKeys | None = None,
        mcp: Mcp | None = None,
    ) -> None:
        self.mcp = mcp
        self.slack = AsyncSlackRequestHandler(app, path=EVENTS_PATH)
        self.health = health
        self.metrics = metrics
        self.public_keys = public_keys
        self.signing_secret = signing_secret.encode()
        self.after_ack = after_ack or AfterAck()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await answer_ops(
            scope, send, self.health, self.metrics, self.public_keys
        ):
            return
        if self.mcp is not None and scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self.mcp(scope, receive, send)
            return
        with self.after_ack.answering():
            await self._slack(scope, receive, send)

    async def _slack(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.slack(dict(scope), receive, send)
            return
        body, refusal = await _read_checked(scope, receive, self.signing_secret)
        if refusal is not None:
            status, reason = refusal
            await _answer(send, status, reason)
            return
        await self.slack(dict(scope), replaying(body, receive), send)


async def _read_checked(
    scope: Scope, receive: Receive, signing_secret: bytes
) -> tuple[bytes, tuple[int, str] | None]:
    """The whole body, and (status, reason) when the request must be refused before Bolt:
    first anything unsigned, then anything Slack signed that Bolt could not take."""
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
    timestamp = headers.get("x-slack-request-timestamp", b"").decode("latin-1").strip()
    if not (timestamp.isascii() and timestamp.isdigit()):
        return body, (401, "X-Slack-Request-Timestamp is missing or not a number")
    signature = headers.get("x-slack-signature", b"").decode("latin-1")
    if not signed_by_slack(signing_secret, body, timestamp, signature):
        return body, (
            401,
            "X-Slack-Signature does not match this body and timestamp (or the timestamp is"
            " more than five minutes old)",
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body, (400, "the request body is not UTF-8")
    parsed: Any
    if b"application/json" in headers.get("content-type", b""):
        parsed, why = _json(text, "the body")
        if why is not None:
            return body, (400, why)
    else:
        fields = parse_qs(text, keep_blank_values=True)
        if "payload" in fields:
            parsed, why = _json(fields["payload"][0], "payload")
            if why is not None:
                return body, (400, why)
            if not isinstance(parsed, dict):
                return body, (400, "payload is not a JSON object")
        else:
            parsed = {key: values[0] for key, values in fields.items()}
    why = payloads.problem(parsed)
    if why is not None:
        log.warning("malformed Slack request refused: %s", why)
        return body, (400, f"malformed request: {why}")
    return body, None


def signed_by_slack(
    secret: bytes, body: bytes, timestamp: str, signature: str, *, now: float | None = None
) -> bool:
    """Slack's request signature ("Verifying requests from Slack"): `v0=` and the hex HMAC-SHA256
    of `v0:{timestamp}:{body}` with the signing secret, the timestamp within five minutes.
    Computed on the raw bytes, so a body that is not even UTF-8 is refused as unsigned
    (slack_sdk's verifier decodes the body first and raises on such bytes)."""
    if abs((time.time() if now is None else now) - int(timestamp)) > 300:
        return False
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode("latin-1"))


def _json(text: str, what: str) -> tuple[Any, str | None]:
    """`text` parsed, or why it cannot be: not JSON, or nested past Python's recursion limit
    (its decoder recurses once per level; Slack never nests that deep)."""
    try:
        return json.loads(text), None
    except ValueError:
        return None, f"{what} is not JSON"
    except RecursionError:
        return None, f"{what} nests JSON deeper than Slack ever does"


async def _answer(send: Send, status: int, reason: str) -> None:
    await _send(send, status, "text/plain; charset=utf-8", reason.encode())
