"""The ASGI call's types, the one check of a body's declared size, and the one way a door that
has read a request's body (to check its size or signature) hands it on: Slack's
`/slack/events` and MCP's `/mcp` both read the body before the framework behind them does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
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
