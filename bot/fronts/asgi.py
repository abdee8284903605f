"""The ASGI call's types, the one check of a body's declared size (`declares_more_than`, and the
middleware both size caps are, `SizeCap`), the one JSON refusal a door sends before the app
behind it runs, and the one way a door that has read a request's body (to check its size or
signature) hands it on: Slack's `/slack/events` and MCP's `/mcp` both read the body before the
framework behind them does."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the held body once, whole, then whatever the client sends next
    (its disconnect)."""
    given = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def declares_more_than(scope: Scope, limit: int) -> bool:
    """Whether a Content-Length header of the request says its body is larger than `limit`
    bytes (refused before anything is read; a body without one is counted as it arrives)."""
    return any(
        name == b"content-length" and value.isdigit() and int(value) > limit
        for name, value in scope.get("headers") or []
    )


async def send_json_refusal(send: Send, status: int, payload: object) -> None:
    """A whole JSON answer with `status` that closes the connection: a door refused the request
    before the app behind it ran (what is left of the body is not read)."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SizeCap(ABC):
    """ASGI middleware that passes `app` HTTP requests with a body of at most `limit` bytes: one
    whose Content-Length says more is refused (`refuse`) before anything is read; how a body
    is counted as it arrives is each door's own (`admit`). Other calls pass untouched."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declares_more_than(scope, self.limit):
            await self.refuse(send)
            return
        await self.admit(scope, receive, send)

    @abstractmethod
    async def refuse(self, send: Send) -> None:
        """Answer a request whose body is larger than `limit`."""

    @abstractmethod
    async def admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a request to `app`, counting its body as it arrives."""
