"""MCP over Streamable HTTP at `/mcp` on `debatebot web` (as `build_web` mounts it), driven by the
official SDK's client: off the loopback address either DEBATEBOT_MCP_TOKEN or the web token is
taken (compared in constant time) and anything else is refused with the protocol's 401; a
debate started there runs on web's workers to its verdict; cancel_debate stops one. SQLite and
PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bot.store import queue
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource, DebateSource
from bot.store.tenancy import EVERY_WORKSPACE
from tests.helpers import DebateScript
from tests.web_door import RunningWeb, running_web

WEB_TOKEN = "web-token-5f0c2d9e8a7b6c5d4e3f"
MCP_TOKEN = "mcp-token-0a1b2c3d4e5f60718293"


@contextlib.asynccontextmanager
async def client(web: RunningWeb, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{web.url}/mcp", http_client=http)) as connected,
    ):
        yield connected


async def call(connected: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await connected.call_tool(tool, arguments)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


@contextlib.asynccontextmanager
async def open_to_the_network(database_url: str, **options: Any) -> AsyncIterator[RunningWeb]:
    """`debatebot web` as on 0.0.0.0, with the web token and DEBATEBOT_MCP_TOKEN set."""
    async with running_web(
        database_url,
        DebateScript().llm(),
        token=WEB_TOKEN,
        listening_as="0.0.0.0",
        mcp_token=MCP_TOKEN,
        **options,
    ) as web:
        yield web


async def test_web_serves_mcp_with_either_token_and_runs_the_debate(database_url: str) -> None:
    async with open_to_the_network(database_url) as web:
        async with client(web, MCP_TOKEN) as connected:
            started = await call(connected, "start_debate", {"question": "Adopt ADR-7?"})
            answer = await call(
                connected, "wait_for_debate", {"id": started["id"], "timeout_s": 50}
            )
        async with client(web, WEB_TOKEN) as connected:
            listed = await call(connected, "list_debates", {"only_mcp": True})
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            stored = queue.get_debate(session, debate_id=started["id"])
    assert answer["finished"] is True
    assert answer["decision"] is not None
    assert [row["id"] for row in listed["result"]] == [started["id"]]
    assert stored.source is DebateSource.MCP
    assert stored.requested_by == "mcp:http"


@pytest.mark.parametrize(
    "token", [None, "wrong-token-0123456789", f"{WEB_TOKEN}x"], ids=["missing", "wrong", "longer"]
)
async def test_web_refuses_mcp_without_one_of_its_tokens(
    database_url: str, token: str | None
) -> None:
    async with open_to_the_network(database_url) as web, httpx2.AsyncClient() as http:
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        answer = await http.post(
            f"{web.url}/mcp",
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
        )
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            stored = queue.count_debates(session)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    error = answer.json()["error"]
    reason = "missing" if token is None else "invalid"
    assert error["message"] == (
        f"unauthorized: {reason} bearer token; send"
        " `Authorization: Bearer <DEBATEBOT_MCP_TOKEN or DEBATEBOT_WEB_TOKEN>`"
    )
    assert stored == 0


async def test_cancel_debate_over_web_stops_a_queued_debate_once(database_url: str) -> None:
    # No worker: the debate stays queued, so both cancels meet it unfinished.
    async with open_to_the_network(database_url, runs_debates=False) as web:
        async with client(web, WEB_TOKEN) as connected:
            started = await call(connected, "start_debate", {"question": "Adopt ADR-7?"})
            first = await call(connected, "cancel_debate", {"id": started["id"]})
            again = await call(connected, "cancel_debate", {"id": started["id"]})
            unknown = await connected.call_tool("cancel_debate", {"id": 999999})
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            stored = queue.get_debate(session, debate_id=started["id"])
    assert (first["new_request"], first["cancelled_from"], first["cancelled_by"]) == (
        True,
        "mcp",
        "mcp:http",
    )
    assert again["new_request"] is False
    assert stored.cancelled_from is CancelSource.MCP
    assert stored.cancel_requested_at is not None
    assert unknown.is_error
    (text,) = unknown.content
    assert text.type == "text"
    assert "there is no debate 999999; `list_debates` shows the ids there are" in text.text
