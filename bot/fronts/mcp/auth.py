"""Bearer auth for MCP over HTTP: a request to `/mcp` must carry `Authorization: Bearer
<DEBATEBOT_MCP_TOKEN>` unless the server listens on the loopback address only (stdio and a
127.0.0.1 listener trust the local user). The token is compared in constant time; a refusal is
the 401 with `WWW-Authenticate: Bearer` the MCP authorization specification gives, with a
JSON-RPC error body, never a traceback."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class AuthConfigError(Exception):
    """MCP over HTTP would be open to the network: the message names the setting to set."""


def bearer_token(token: str | None, *, host: str) -> str | None:
    """The token `/mcp` requires when listening on `host`: None on the loopback address (the
    local user is trusted), else `token`; AuthConfigError when it is needed and not set."""
    if host in LOOPBACK:
        return None
    if not token:
        raise AuthConfigError(
            f"MCP over HTTP on {host} needs DEBATEBOT_MCP_TOKEN (a long random secret agents send"
            " as `Authorization: Bearer …`), or listen on 127.0.0.1 (DEBATEBOT_HTTP_HOST)"
        )
    return token


class BearerGate:
    """Passes a request to `app` only with the bearer token (when one is required)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.expected is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        reason = "missing bearer token" if not given else "invalid bearer token"
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32001,
                "message": f"unauthorized: {reason}; send"
                " `Authorization: Bearer <DEBATEBOT_MCP_TOKEN>`",
            },
        }
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer error="invalid_token"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})
