"""Bearer auth for MCP over HTTP: a request to `/mcp` must carry `Authorization: Bearer <token>`
with DEBATEBOT_MCP_TOKEN or the web token (DEBATEBOT_WEB_TOKEN), unless the server listens on
the loopback address only (stdio and a 127.0.0.1 listener trust the local user; the one rule,
`bot.fronts.listening`, both `serve` and `web` use). Tokens are compared in constant time; a
refusal is the 401 with `WWW-Authenticate: Bearer` the MCP authorization specification gives,
with a JSON-RPC error body, never a traceback."""

from __future__ import annotations

import hmac
import json

from pydantic import SecretStr

from bot.fronts.asgi import ASGIApp, Receive, Scope, Send
from bot.fronts.listening import is_loopback

TOKENS = "DEBATEBOT_MCP_TOKEN or DEBATEBOT_WEB_TOKEN"


class AuthConfigError(Exception):
    """MCP over HTTP would be open to the network: the message names the setting to set."""


def accepted_tokens(mcp_token: SecretStr | None, web_token: str | None) -> tuple[str, ...]:
    """The tokens an agent may send to `/mcp`: DEBATEBOT_MCP_TOKEN and the web token, each
    when set."""
    given = (mcp_token.get_secret_value() if mcp_token else None, web_token)
    return tuple(token.strip() for token in given if token and token.strip())


def bearer_tokens(tokens: tuple[str, ...], *, host: str) -> tuple[str, ...]:
    """The tokens `/mcp` requires when listening on `host`: none on the loopback address (the
    local user is trusted), else `tokens`; AuthConfigError when one is needed and none is set."""
    if is_loopback(host):
        return ()
    if not tokens:
        raise AuthConfigError(
            f"MCP over HTTP on {host} needs {TOKENS} (a long random secret agents send as"
            " `Authorization: Bearer …`), or listen on 127.0.0.1 (DEBATEBOT_HTTP_HOST for"
            " serve, DEBATEBOT_WEB_HOST for web)"
        )
    return tokens


class BearerGate:
    """Passes a request to `app` only with one of the bearer tokens (when any is required)."""

    def __init__(self, app: ASGIApp, tokens: tuple[str, ...]) -> None:
        self.app = app
        self.expected = tuple(f"Bearer {token}".encode() for token in tokens)

    def _matches(self, given: bytes) -> bool:
        # Every token is compared, with no early exit: the time taken does not tell which
        # token a guess came close to, or how many there are to try.
        matched = False
        for expected in self.expected:
            matched |= hmac.compare_digest(given, expected)
        return matched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.expected or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if self._matches(given):
            await self.app(scope, receive, send)
            return
        reason = "missing bearer token" if not given else "invalid bearer token"
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32001,
                "message": f"unauthorized: {reason}; send `Authorization: Bearer <{TOKENS}>`",
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
