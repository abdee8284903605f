"""MCP over Streamable HTTP at `/mcp` on the bot's HTTP front door (as `debatebot serve` mounts
it, `bot.serving._mcp`), driven by the official SDK's client: a debate started, run by the
bot's own workers and followed to its verdict with the bearer token; refusals without it or
with a wrong one (the 401 the MCP authorization specification gives, never a traceback)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bot.fronts.mcp.auth import AuthConfigError, bearer_tokens
from bot.fronts.mcp.body_cap import MAX_BODY_BYTES
from bot.fronts.mcp.http import McpHttp
from bot.messages import action_ids
from bot.runtime import check_bot_token
from bot.serving import _mcp
from bot.store import channels
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource
from bot.wiring import build_services
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.host_emulators import GitHubEmulator
from tests.helpers import DebateScript

TOKEN = "mcp-test-token-0123456789abcdef"


@contextlib.asynccontextmanager
async def mounted(bot: Bot) -> AsyncIterator[tuple[McpHttp, str]]:
    """`/mcp` mounted on the running bot's front door as serve mounts it (after its start-up
    check of the bot token, which learns the workspace); its URL."""
    assert bot.runtime.directory is not None
    await check_bot_token(bot.runtime.directory, bot.engine, audit_key=None)
    services = build_services(bot.settings, resolve_llm=lambda _model: bot.llm)
    mcp = _mcp(bot.settings, services, bot.engine, bot.runtime)
    assert mcp is not None
    bot.runtime.asgi.mcp = mcp
    try:
        async with mcp.running():
            yield mcp, f"{bot.driver.bot_url}/mcp"
    finally:
        await services.aclose()


@contextlib.asynccontextmanager
async def client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as connected,
    ):
        yield connected


async def call(connected: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await connected.call_tool(tool, arguments)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def test_a_debate_over_http_runs_on_the_bots_workers_to_its_verdict(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(mcp_token=TOKEN)
    async with mounted(bot) as (_, url), client(url, TOKEN) as connected:
        started = await call(connected, "start_debate", {"question": "Adopt ADR-7?"})
        answer = await call(connected, "wait_for_debate", {"id": started["id"], "timeout_s": 50})
        protocols = await call(connected, "list_protocols", {})
    assert answer["finished"] is True
    assert answer["source"] == "mcp"
    assert answer["decision"] is not None
    assert [p["name"] for p in protocols["result"]][:2] == ["adversarial", "consensus"]
    (stored,) = bot.debates()
    assert stored.source is DebateSource.MCP
    assert stored.channel_id is None


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["missing", "wrong"])
async def test_mcp_over_http_refuses_a_call_without_the_token(
    start_bot: BotFactory, token: str | None
) -> None:
    bot = await start_bot(mcp_token=TOKEN)
    async with mounted(bot) as (_, url), httpx2.AsyncClient() as http:
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        answer = await http.post(
            url,
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
        )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    error = answer.json()["error"]
    reason = "missing" if token is None else "invalid"
    assert error["message"].startswith(f"unauthorized: {reason} bearer token")
    assert bot.debates() == []


async def test_the_sdk_client_without_the_token_gets_the_protocol_error(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(mcp_token=TOKEN)
    async with mounted(bot) as (_, url):
        with pytest.raises(ExceptionGroup) as refused:
            async with client(url, None):
                pass
    errors = leaves(refused.value)
    assert [type(error) for error in errors] == [MCPError]
    assert str(errors[0]).startswith("unauthorized: missing bearer token")


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for error in group.exceptions:
        found += leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
    return found


def test_mcp_needs_a_token_off_the_loopback_address() -> None:
    assert bearer_tokens((), host="127.0.0.1") == ()
    assert bearer_tokens((TOKEN,), host="127.0.0.2") == ()
    assert bearer_tokens((TOKEN,), host="0.0.0.0") == (TOKEN,)
    with pytest.raises(AuthConfigError, match="needs DEBATEBOT_MCP_TOKEN or DEBATEBOT_WEB_TOKEN"):
        bearer_tokens((), host="0.0.0.0")


async def test_serve_mounts_no_mcp_off_the_loopback_address_without_a_token(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(http_host="0.0.0.0")
    services = build_services(bot.settings, resolve_llm=lambda _model: bot.llm)
    try:
        assert _mcp(bot.settings, services, bot.engine, bot.runtime) is None
        open_locally = _mcp(
            bot.settings.model_copy(update={"http_host": "127.0.0.1"}),
            services,
            bot.engine,
            bot.runtime,
        )
        assert open_locally is not None
        assert open_locally.gate.expected == ()
    finally:
        await services.aclose()


async def test_an_escalated_agents_debate_is_decided_by_the_review_channels_reviewers(
    start_bot: BotFactory,
) -> None:
    """DEBATEBOT_MCP_REVIEW_CHANNEL: the intake records the channel with the debate, the ending
    stages the review request (nothing else: the debate has no thread), the delivery posts it
    there, a reviewer decides in Slack, and the agent reads first that people are deciding,
    then their decision."""
    bot = await start_bot(mcp_token=TOKEN, mcp_review_channel=CHANNEL)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"reviewers": [REVIEWER]}
        )
    async with mounted(bot) as (_, url), client(url, TOKEN) as connected:
        started = await call(connected, "start_debate", {"question": "Adopt ADR-7?"})
        waited = await call(connected, "wait_for_debate", {"id": started["id"], "timeout_s": 50})
        request = await bot.wait_for(
            lambda: next(
                (m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
            ),
            "the review request in the channel",
        )
        # As the reviewer's client saw it before any update (the emulator edits in place).
        request = copy.deepcopy(request)
        posted = list(bot.emulator.posted(CHANNEL))
        await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
        view = await bot.wait_for(
            lambda: bot.emulator.views and bot.emulator.views[-1], "note modal"
        )
        note = {"note": {"type": "plain_text_input", "value": "Fine for the agent to go on."}}
        await bot.driver.submit(view, note, user=REVIEWER)

        after = await call(connected, "get_debate", {"id": started["id"]})
        for _ in range(600):  # the decision is recorded after Slack is answered
            if "decision" in after["review"]:
                break
            await asyncio.sleep(0.05)
            after = await call(connected, "get_debate", {"id": started["id"]})
    (stored,) = bot.debates()
    assert (stored.channel_id, stored.review_channel_id) == (None, CHANNEL)
    assert stored.reviewers_channel_id == CHANNEL
    assert waited["finished"] is True
    assert waited["escalate"] is True
    review = waited["review"]
    assert (review["state"], review["channel"], review["sample"]) == ("open", CHANNEL, False)
    assert review["people_deciding"].startswith(
        f"people are deciding this verdict: the review request is in Slack channel {CHANNEL},"
        " whose reviewers decide. Do not act on the verdict alone"
    )
    # The request stands on its own in the channel (the question with it, no thread, no
    # Another round: there is no thread to continue in), and nothing else was posted.
    assert [m["ts"] for m in posted] == [request["ts"]]
    assert request.get("thread_ts") is None
    assert "Adopt ADR-7?" in str(request["blocks"])
    assert f"<@{REVIEWER}>" in request["blocks"][0]["text"]["text"]
    assert stored.team_id == WORKSPACE.team_id
    actions = next(b for b in request["blocks"] if b["type"] == "actions")
    assert [e["action_id"] for e in actions["elements"]] == [
        action_ids.ACTION_APPROVE,
        action_ids.ACTION_REJECT,
    ]
    assert after["review"]["decision"] == "approved"
    assert after["review"]["reviewer"] == REVIEWER
    assert after["review"]["note"] == "Fine for the agent to go on."
    assert after["review"]["people_decided"] == f"{REVIEWER} decided: approved"


async def test_over_serve_a_link_is_read_and_a_running_debate_is_cancelled(
    start_bot: BotFactory,
) -> None:
    github = GitHubEmulator()
    await github.start()
    github.add_file("acme/orders", "abc1234", "docs/adr/0012-postgres.md", "# 12. Postgres\n")
    link = f"{github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md"
    llm = DebateScript().llm()
    llm.delay_s = 60  # every call outlasts the test unless the cancel abandons it
    try:
        bot = await start_bot(
            llm=llm,
            mcp_token=TOKEN,
            github_url=github.url,
            github_api_url=f"{github.url}/api/v3",
            github_token=github.token,
        )
        async with mounted(bot) as (_, url), client(url, TOKEN) as connected:
            started = await call(
                connected, "start_debate", {"question": "Adopt ADR-12?", "link": link}
            )
            await bot.wait_for(lambda: bot.debates()[0].state == "running", "the debate running")
            asked = await call(connected, "cancel_debate", {"id": started["id"]})
            ended = await call(connected, "wait_for_debate", {"id": started["id"], "timeout_s": 50})
            again = await connected.call_tool("cancel_debate", {"id": started["id"]})
    finally:
        await github.stop()
    (stored,) = bot.debates()
    assert stored.link == link
    assert json.loads(stored.spec_json)["context"][0]["text"] == "# 12. Postgres\n"
    assert (asked["new_request"], asked["cancelled_by"]) == (True, "mcp:http")
    assert ended["finished"] is True
    assert ended["outcome"] == "CANCELLED"
    assert again.is_error
    (text,) = again.content
    assert text.type == "text"
    assert "has already finished (cancelled); there is nothing to stop" in text.text


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_body_past_the_cap_is_refused_before_the_sdk_reads_it(
    start_bot: BotFactory, declared: bool
) -> None:
    """The SDK's transport reads a body whole with no bound: `/mcp` refuses one past its cap,
    whether it says its length or streams without one, and a normal call still works after."""
    bot = await start_bot(mcp_token=TOKEN)
    call_body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "start_debate", "arguments": {"question": "x" * MAX_BODY_BYTES}},
    }
    payload = json.dumps(call_body).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 64 * 1024):
            yield payload[start : start + 64 * 1024]

    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
    }
    async with mounted(bot) as (_, url), httpx2.AsyncClient(timeout=60) as http:
        answer = await http.post(url, headers=headers, content=payload if declared else chunks())
        assert answer.status_code == 413
        assert f"larger than the {MAX_BODY_BYTES:,} bytes" in answer.json()["error"]["message"]
        async with client(url, TOKEN) as connected:
            started = await call(connected, "start_debate", {"question": "Adopt ADR-7?"})
    assert [d.id for d in bot.debates()] == [started["id"]]
