"""MCP over Streamable HTTP at `/mcp`, for `debatebot serve`'s HTTP port and `debatebot web`'s:
the SDK's own transport app behind the bearer gate (`auth`). The SDK's session manager needs a
running task group for as long as requests arrive; `running()` holds it for the hosting process
(its HTTP server runs without ASGI lifespan events, so the SDK's lifespan would never start
it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from mcp.server.mcpserver import MCPServer

from bot.fronts.asgi import Receive, Scope, Send
from bot.fronts.mcp.auth import AuthConfigError, BearerGate, bearer_tokens
from bot.fronts.mcp.body_cap import BodyCap
from bot.fronts.mcp.paths import AllowedDirs
from bot.fronts.mcp.reading import Reader
from bot.fronts.mcp.server import McpFront, build_server
from bot.fronts.mcp.watching import DebateWatch
from bot.hosts.clients import HostClients
from bot.intake.intake import Intake

log = logging.getLogger(__name__)

PATH = "/mcp"
AGENT = "mcp:http"
"""Who a debate asked for over HTTP is requested by (and a cancel made there, made by)."""


class McpHttp:
    """The `/mcp` endpoint: `__call__` serves a request, `running()` keeps the SDK's session
    manager alive around the server that routes to it."""

    def __init__(
        self, server: MCPServer, *, tokens: tuple[str, ...], host: str, watch: DebateWatch
    ) -> None:
        # `host` lets the SDK turn on its DNS-rebinding check for a loopback listener.
        self.app = server.streamable_http_app(streamable_http_path=PATH, host=host)
        self.server = server
        self.watch = watch
        # Authenticated before anything of the body is read; capped before the SDK reads it.
        self.gate = BearerGate(BodyCap(self.app), tokens)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            watching = asyncio.create_task(self.watch.run_forever())
            try:
                yield
            finally:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.gate(scope, receive, send)


def mcp_over_http(
    intake: Intake,
    *,
    reader: Reader,
    hosts: HostClients | None,
    tokens: tuple[str, ...],
    host: str,
) -> McpHttp | None:
    """`/mcp` for a server listening on `host`, admitting through `intake` (its debates run by
    the process's workers; context is text or a link, never a file); None (logged) when `host`
    is not the loopback address and no token is set, so MCP is never open to the network
    unauthenticated."""
    try:
        required = bearer_tokens(tokens, host=host)
    except AuthConfigError as error:
        log.info("no /mcp: %s", error)
        return None
    front = McpFront(
        intake=intake, reader=reader, allowed=AllowedDirs([]), requested_by=AGENT, hosts=hosts
    )
    return McpHttp(build_server(front), tokens=required, host=host, watch=front.watch())
