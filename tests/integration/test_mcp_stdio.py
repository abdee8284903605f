"""`debatebot mcp` over stdio, driven by the official SDK's own client against a subprocess on
the fake provider: a debate started, followed and answered with its verdict; bad input answered
with tool errors an agent can act on; context paths outside the allowed directories refused."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import TextResourceContents
from sqlmodel import Session, select

from bot.cli import main
from bot.store import reviews
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate, DebateSource
from bot.store.outbox_tables import Outbox, OutboxTarget
from bot.store.review_tables import EscalationState
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from engine.models import MAX_CONTEXT_CHARS
from tests.e2e.host_emulators import GitHubEmulator, OtherHost, redirect

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'mcp.sqlite3'}"
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    return url


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = tmp_path / "allowed"
    folder.mkdir()
    (folder / "adr.md").write_text("ADR-7: move sessions to Postgres.\nDecision: drop Redis.\n")
    return folder


@contextlib.asynccontextmanager
async def serving(
    database: str, allowed: Path, *flags: str, **settings: str
) -> AsyncIterator[Client]:
    """A `debatebot mcp` subprocess and the SDK's client on it (a context manager, not a
    fixture: the SDK's task group must close in the task that opened it)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.cli", "mcp", "--allow-dir", str(allowed), *flags],
        env=environment(database, **settings),
        cwd=str(ROOT),
    )
    async with Client(params) as connected:
        yield connected


def environment(database: str, **settings: str) -> dict[str, str]:
    """What a `debatebot` subprocess runs with: this checkout, the fake model, `settings`."""
    return {
        "PYTHONPATH": str(ROOT),
        "DEBATEBOT_DATABASE_URL": database,
        "DEBATEBOT_PROVIDER": "fake",
        "PATH": os.environ.get("PATH", ""),
        **{f"DEBATEBOT_{name.upper()}": value for name, value in settings.items()},
    }


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0]
    assert text.type == "text"
    return text.text


async def test_a_debate_started_over_mcp_runs_to_its_verdict_and_is_stored_as_mcp(
    database: str, allowed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with serving(database, allowed) as client:
        await follow_a_debate(client, database)
    capsys.readouterr()
    assert main(["stats"]) == 0
    assert "started by: mcp 1\n" in capsys.readouterr().out
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sources"] == {"mcp": 1}


async def follow_a_debate(client: Client, database: str) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) >= {
        "start_debate",
        "get_debate",
        "wait_for_debate",
        "list_debates",
        "list_protocols",
        "verify_record",
    }
    assert listed["start_debate"].input_schema["required"] == ["question"]

    started = await call(
        client, "start_debate", {"question": "Adopt ADR-7?", "context_files": ["adr.md"]}
    )
    debate_id = started["id"]
    assert started["state"] == "queued"

    told: list[float] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        told.append(progress)

    waited = await client.call_tool(
        "wait_for_debate", {"id": debate_id, "timeout_s": 50}, progress_callback=heard
    )
    answer: dict[str, Any] | None = waited.structured_content
    assert answer is not None
    assert answer["finished"] is True
    assert answer["state"] == "finished"
    assert answer["source"] == "mcp"
    assert answer["decision"] == "revise"
    assert set(answer["confidence_components"]["values"]) >= {"agreement", "declared"}
    assert answer["audit"] == {"chain_ok": True, "kind": None}
    # Each new count of turns was reported, up to the last.
    assert told == sorted(set(told))
    assert told[-1] == answer["turns_so_far"]

    read = await client.read_resource(f"debate://{debate_id}")
    (content,) = read.contents
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text)["decision"] == answer["decision"]
    with pytest.raises(MCPError, match="debate://4242: there is no debate 4242"):
        await client.read_resource("debate://4242")

    verified = await call(client, "verify_record", {"id": debate_id})
    assert verified["ok"] is True
    assert verified["turns_checked"] == answer["turns_so_far"]
    recent = await call(client, "list_debates", {"only_mcp": True})
    assert [row["id"] for row in recent["result"]] == [debate_id]

    engine = make_engine(database)
    with Session(engine) as session:
        stored = session.exec(select(Debate)).one()
    engine.dispose()
    assert stored.source is DebateSource.MCP
    assert stored.requested_by is not None
    assert stored.requested_by.startswith("mcp:")
    assert stored.spec_json.count("ADR-7: move sessions") == 1

    # What a protocol typically costs is what its finished debates here cost, and nothing
    # is said of a protocol no debate of which has finished.
    listed_protocols = {p["name"]: p for p in (await call(client, "list_protocols", {}))["result"]}
    adversarial = listed_protocols["adversarial"]
    assert adversarial["typical_cost_usd"] == round(stored.cost_usd, 6)  # the fake bills $0
    assert adversarial["cost_from_debates"] == 1
    assert adversarial["calls_per_debate"] == 5
    assert adversarial["models"]["debaters"].startswith("fake:")
    assert listed_protocols["panel"]["typical_cost_usd"] is None
    assert listed_protocols["panel"]["cost_from_debates"] == 0


async def test_bad_input_is_a_tool_error_naming_what_to_change(
    database: str, allowed: Path
) -> None:
    async with serving(database, allowed) as client:
        await bad_input(client)


async def bad_input(client: Client) -> None:
    unknown = await refused(client, "start_debate", {"question": "Q?", "protocol": "duel"})
    assert "unknown protocol 'duel'; use one of: adversarial, consensus" in unknown

    rounds = await refused(
        client, "start_debate", {"question": "Q?", "protocol": "adversarial", "rounds": 9}
    )
    assert "rounds=9 is out of range for the adversarial protocol: give 1 to 3" in rounds

    budget = await refused(client, "start_debate", {"question": "Q?", "budget_usd": -1})
    assert "budget_usd=-1.0 is out of range: give a positive amount" in budget

    big = await refused(
        client, "start_debate", {"question": "Q?", "context": ["x" * (MAX_CONTEXT_CHARS + 1)]}
    )
    assert f"more than the {MAX_CONTEXT_CHARS:,} a debate can read" in big

    empty = await refused(client, "start_debate", {"question": "  "})
    assert "`question` is empty: give the decision to debate" in empty

    stances = await refused(client, "start_debate", {"question": "Q?", "protocol": "stances"})
    assert "the stances protocol needs at least two debaters" in stances

    missing = await refused(client, "get_debate", {"id": 4242})
    assert "there is no debate 4242; `list_debates` shows the ids there are" in missing
    assert (await call(client, "list_debates", {}))["result"] == []


async def test_context_paths_outside_the_allowed_directories_are_refused_by_name(
    database: str, allowed: Path, tmp_path: Path
) -> None:
    async with serving(database, allowed) as client:
        await path_refusals(client, allowed, tmp_path)


async def path_refusals(client: Client, allowed: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for agents")
    (allowed / "link.md").symlink_to(secret)

    outside = await refused(
        client, "start_debate", {"question": "Q?", "context_files": [str(secret)]}
    )
    assert f"context file {str(secret)!r} refused: it is outside the allowed directories" in outside

    linked = await refused(client, "start_debate", {"question": "Q?", "context_files": ["link.md"]})
    assert "context file 'link.md' refused: it is outside the allowed directories" in linked
    assert "symlink" in linked

    dotted = await refused(
        client, "start_debate", {"question": "Q?", "context_files": ["../secret.txt"]}
    )
    assert "context file '../secret.txt' refused: paths may not contain '..'" in dotted

    os.mkfifo(allowed / "pipe")
    fifo = await refused(client, "start_debate", {"question": "Q?", "context_files": ["pipe"]})
    assert "context file 'pipe' refused: it is not a regular file" in fifo
    assert (await call(client, "list_debates", {}))["result"] == []


async def test_the_intakes_in_flight_limit_holds_for_agents_and_is_named(
    database: str, allowed: Path
) -> None:
    async with serving(database, allowed, "--no-run", max_debates_per_user="1") as client:
        first = await call(client, "start_debate", {"question": "Adopt ADR-7?"})
        refusal = await refused(client, "start_debate", {"question": "Adopt ADR-8?"})
        queued = await call(client, "get_debate", {"id": first["id"]})
    assert "you already have 1 debates queued or running" in refusal
    assert "(DEBATEBOT_MAX_DEBATES_PER_USER=1)" in refusal
    # --no-run: the admitted debate waits for a worker.
    assert queued["state"] == "queued"
    assert queued["next"] == "call wait_for_debate with this id to wait for the verdict"


async def test_a_listener_hears_when_the_debate_resource_changes(
    database: str, allowed: Path
) -> None:
    # A fresh store: the first debate is debate 1, so the listener is in place before it starts.
    async with serving(database, allowed) as client:
        with anyio.fail_after(60):
            async with client.listen(resource_subscriptions=["debate://1"]) as events:
                started = await call(client, "start_debate", {"question": "Adopt ADR-7?"})
                event = await events.__anext__()
        after = await call(client, "get_debate", {"id": started["id"]})
    assert started["id"] == 1
    assert isinstance(event, ResourceUpdated)
    assert event.uri == "debate://1"
    assert after["state"] == "finished"


async def test_a_listener_hears_of_a_debate_a_worker_elsewhere_runs_until_it_ends(
    database: str, allowed: Path
) -> None:
    """--no-run leaves the debate to `debatebot worker`, another process that cannot reach this
    server's listeners: the server reads the store while someone listens and tells each change
    (each stored turn, the end) up to the end."""
    async with serving(database, allowed, "--no-run") as client:
        with anyio.fail_after(90):
            async with client.listen(resource_subscriptions=["debate://1"]) as events:
                started = await call(client, "start_debate", {"question": "Adopt ADR-7?"})
                heard: list[object] = []
                worker = await anyio.open_process(
                    [sys.executable, "-m", "bot.cli", "worker", "--exit-when-idle"],
                    # Calls slower than the server's reads, so the turns are told one by one.
                    env=environment(database, fake_delay_s="1.5"),
                    cwd=str(ROOT),
                )
                async with worker:
                    # Each change is told: wait for one, then look; the end is told too, so
                    # the loop cannot wait for nothing once the debate is over.
                    while True:
                        heard.append(await events.__anext__())
                        if (await call(client, "get_debate", {"id": 1}))["state"] == "finished":
                            break
                    await worker.wait()
    assert started["id"] == 1
    assert worker.returncode == 0
    assert len(heard) >= 2, "at least one turn, and the end"
    assert {event.uri for event in heard if isinstance(event, ResourceUpdated)} == {"debate://1"}


async def test_cancel_debate_stops_a_debate_once_and_refuses_a_finished_or_unknown_one(
    database: str, allowed: Path
) -> None:
    # --no-run: the debate waits queued, so both cancels meet it unfinished.
    async with serving(database, allowed, "--no-run") as client:
        started = await call(client, "start_debate", {"question": "Adopt ADR-7?"})
        debate_id = started["id"]
        first = await call(client, "cancel_debate", {"id": debate_id})
        again = await call(client, "cancel_debate", {"id": debate_id})
        unknown = await refused(client, "cancel_debate", {"id": 4242})
    assert first["new_request"] is True
    assert first["cancelled_from"] == "mcp"
    assert first["cancelled_by"].startswith("mcp:")
    assert f"call wait_for_debate with id {debate_id}" in first["next"]
    assert again["new_request"] is False
    assert again["cancelled_by"] == first["cancelled_by"]
    assert again["next"].startswith(
        f"a cancel was already asked (stopped by {first['cancelled_by']}"
    )
    assert "over MCP" in again["next"]
    assert unknown.endswith(
        "cancel_debate: there is no debate 4242; `list_debates` shows the ids there are"
    )

    # A worker claims it and ends it as cancelled without a model call.
    worker = await anyio.run_process(
        [sys.executable, "-m", "bot.cli", "worker", "--exit-when-idle"],
        env=environment(database),
        cwd=str(ROOT),
        check=False,
    )
    assert worker.returncode == 0, worker.stderr

    async with serving(database, allowed, "--no-run") as client:
        ended = await call(client, "get_debate", {"id": debate_id})
        finished = await refused(client, "cancel_debate", {"id": debate_id})
    assert ended["state"] == "finished"
    assert ended["outcome"] == "CANCELLED"
    assert ended["turns_so_far"] == 0
    assert finished.endswith(
        f"cancel_debate: debate {debate_id} has already finished (cancelled); there is nothing"
        f" to stop; call get_debate with id {debate_id} for its verdict"
    )


ADR = "# 12. Use PostgreSQL for the order service\n\nWe keep orders in PostgreSQL.\n"


async def test_start_debate_reads_a_github_link_and_refuses_one_it_cannot_read_in_words(
    database: str, allowed: Path
) -> None:
    github, elsewhere = GitHubEmulator(), OtherHost()
    await github.start()
    await elsewhere.start()
    github.add_file("acme/orders", "abc1234", "docs/adr/0012-postgres.md", ADR)
    file_link = f"{github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md"
    hosts = {
        "github_url": github.url,
        "github_api_url": f"{github.url}/api/v3",
        "github_token": github.token,
    }
    try:
        async with serving(database, allowed, "--no-run", **hosts) as client:
            started = await call(
                client, "start_debate", {"question": "Adopt ADR-12?", "link": file_link}
            )
            private = await refused(
                client,
                "start_debate",
                {
                    "question": "Q?",
                    "link": f"{github.url}/acme/gone/blob/abc1234/docs/adr/1.md",
                },
            )
            foreign = await refused(
                client, "start_debate", {"question": "Q?", "link": "https://example.org/adr.md"}
            )
            dotted = await refused(
                client,
                "start_debate",
                {"question": "Q?", "link": f"{github.url}/acme/orders/blob/abc1234/%2e%2e/x.md"},
            )
            github.fail(redirect(elsewhere.url))
            moved = await refused(client, "start_debate", {"question": "Q?", "link": file_link})
    finally:
        await github.stop()
        await elsewhere.stop()

    engine = make_engine(database)
    with Session(engine) as session:
        stored = session.exec(select(Debate)).one()
    engine.dispose()
    assert stored.id == started["id"]
    assert stored.link == file_link
    (document,) = json.loads(stored.spec_json)["context"]
    assert document["title"] == "docs/adr/0012-postgres.md @ abc1234"
    assert document["text"] == ADR

    assert "I cannot see `acme/gone/docs/adr/1.md@abc1234` on GitHub" in private
    assert "Give the bot a token that can read it (DEBATEBOT_GITHUB_TOKEN)" in private
    assert "is not a link to a file (…/blob/REF/PATH) or a pull or merge request" in foreign
    assert "(DEBATEBOT_GITHUB_URL, DEBATEBOT_GITLAB_URL)" in foreign
    assert "which could reach outside the repository on GitHub" in dotted
    assert "the bot never follows a redirect with its token" in moved
    assert "DEBATEBOT_GITHUB_API_URL" in moved
    # The token went to the configured API only: the redirect was not followed at all.
    assert elsewhere.requests == []
    assert all(request.startswith("GET /api/v3/repos/acme/") for request in github.requests)


async def test_an_escalated_debate_run_over_stdio_owes_only_its_review_request_to_the_channel(
    database: str, allowed: Path
) -> None:
    """The stdio server runs the debate; its ending stages the review request for the agents'
    review channel (`serve` or a worker delivers it) and nothing else. A Slack reviewer's
    decision is stamped with the workspace the click came from while the debate is still
    `pending`; the agent reads it all the same."""
    slack = {"mcp_review_channel": "CREVIEW1", "slack_bot_token": "xoxb-1234567890-abcdefghijkl"}
    # Every verdict below full confidence escalates.
    async with serving(database, allowed, escalation_threshold="1.0", **slack) as client:
        started = await call(client, "start_debate", {"question": "Adopt ADR-7?"})
        waited = await call(client, "wait_for_debate", {"id": started["id"], "timeout_s": 50})
        engine = make_engine(database)
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            owed = list(session.exec(select(Outbox)))
            escalation = reviews.escalation_for(session, debate_id=started["id"])
            assert escalation is not None
            assert escalation.id is not None
            escalation_id = escalation.id
        with session_scope(engine, workspace=Workspace(team_id="T1", with_pending=True)) as s:
            reviews.record_review(
                s,
                escalation_id=escalation_id,
                reviewer="UREVIEW",
                decision=EscalationState.REJECTED,
                note="Not without a rollback plan.",
            )
            s.commit()
        engine.dispose()
        after = await call(client, "get_debate", {"id": started["id"]})
    assert waited["escalate"] is True
    assert waited["review"]["state"] == "open"
    assert "the review request is in Slack channel CREVIEW1" in waited["review"]["people_deciding"]
    assert [(row.key, row.channel_id, row.target) for row in owed] == [
        ("review", "CREVIEW1", OutboxTarget.CHANNEL)
    ]
    assert after["review"]["decision"] == "rejected"
    assert after["review"]["reviewer"] == "UREVIEW"
    assert after["review"]["note"] == "Not without a rollback plan."
