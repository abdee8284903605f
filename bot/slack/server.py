"""The HTTP face of the bot: an ASGI app serving Slack at `/slack/events` and `/healthz`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from slack_bolt.adapter.asgi.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
HealthCheck = Callable[[], dict[str, Any]]

EVENTS_PATH = "/slack/events"


class BotASGI:
    """Routes `/healthz` to the health check and everything else to Bolt's request handler."""

    def __init__(self, app: AsyncApp, health: HealthCheck) -> None:
        self.slack = AsyncSlackRequestHandler(app, path=EVENTS_PATH)
        self.health = health

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/healthz":
            report = await asyncio.to_thread(self.health)
            body = json.dumps(report).encode()
            status = 200 if report.get("ok") else 503
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.slack(scope, receive, send)  # type: ignore[arg-type]
