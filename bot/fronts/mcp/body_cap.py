"""A size cap on what `/mcp` reads: the SDK's Streamable HTTP transport reads a request's body
whole with no bound, so a request larger than `limit` is refused before the SDK sees it, by its
Content-Length when it gives one, else as soon as the bytes that arrive pass the limit (the
body is held, at most `limit` bytes, and handed on once complete)."""

from __future__ import annotations

from bot.fronts.asgi import ASGIApp, Receive, Scope, Send, SizeCap, replaying, send_json_refusal
from engine.models import MAX_CONTEXT_CHARS

MAX_BODY_BYTES = 6 * MAX_CONTEXT_CHARS + 256 * 1024
"""A `start_debate` with a context at the intake's limit, each character JSON-escaped at worst
as `\\u00XX` (6 bytes), and room for the rest of the call: anything larger the intake would
refuse anyway."""
TOO_LARGE = -32600  # JSON-RPC's "Invalid Request"


class BodyCap(SizeCap):
    """Passes a request to `app` only when its body is at most `limit` bytes; a larger one gets
    a 413 with a JSON-RPC error naming the limit."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        super().__init__(app, limit)

    async def admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hold the body (at most `limit` bytes) and hand it on once complete."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away before its body was whole: nothing to answer.
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self.refuse(send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(bytes(body), receive), send)

    async def refuse(self, send: Send) -> None:
        error = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": TOO_LARGE,
                "message": f"the request is larger than the {self.limit:,} bytes this server"
                " reads; send less context (the intake's limit is"
                f" {MAX_CONTEXT_CHARS:,} characters) or pass it as a link",
            },
        }
        await send_json_refusal(send, 413, error)
