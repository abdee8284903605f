"""The HTTP API of `debatebot web` (issue 43) on SQLite and PostgreSQL: a debate asked, followed
and read back with its verdict; retries with an Idempotency-Key; every refusal JSON with its
status; reviews recorded as Slack's are; the OpenAPI description matching what is served."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from sqlmodel import select
from starlette.routing import Route

from bot.fronts.web.openapi import OPENAPI
from bot.fronts.web.reading import DebateOut
from bot.receipt_verifier import verify
from bot.store import thresholds
from bot.store.db import session_scope
from bot.store.receipts import receipt_parts
from bot.store.review_tables import Review
from bot.store.tenancy import EVERY_WORKSPACE, PENDING_WORKSPACE
from engine.models import ThresholdSource
from engine.providers.fake import FunctionLLM, StreamRate
from tests.helpers import DebateScript, reply_for
from tests.web_door import RunningWeb, running_web


async def call(
    web: RunningWeb, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        data = json.dumps(body) if body is not None and not isinstance(body, bytes) else body
        sent = {"content-type": "application/json", **headers} if body is not None else headers
        async with http.request(method, web.url + path, data=data, headers=sent) as answer:
            text = await answer.text()
            kind = answer.headers.get("content-type", "")
            return answer.status, json.loads(text) if kind.startswith("application/json") else text


async def finished(web: RunningWeb, debate_id: int) -> dict[str, Any]:
    for _ in range(600):
        status, found = await call(web, "GET", f"/api/debates/{debate_id}")
        assert status == 200
        if found["state"] == "finished":
            return dict(found)
        await asyncio.sleep(0.05)
    raise AssertionError(f"debate {debate_id} did not finish")


async def test_a_debate_asked_over_http_is_followed_and_read_back(database_url: str) -> None:
    async with running_web(database_url, DebateScript().llm()) as web:
        status, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        assert status == 201
        debate_id = created["id"]
        assert created["source"] == "api"

        found = await finished(web, debate_id)
        DebateOut.model_validate(found)
        assert found["verdict"]["decision"] == found["decision"] == "revise"
        assert [c["name"] for c in found["verdict"]["components"]][:2] == [
            "agreement",
            "position_bias",
        ]
        assert "judges agree" in found["verdict"]["confidence_line"]
        assert [t["role"] for t in found["turns"]][:3] == ["framing", "proposer", "critic"]
        assert found["cost_usd"] >= 0
        status, listed = await call(web, "GET", "/api/debates")
        assert [d["id"] for d in listed["debates"]] == [debate_id]
        assert listed["debates"][0]["decision"] == "revise"


async def test_a_retry_with_the_same_idempotency_key_gets_the_same_debate(
    database_url: str,
) -> None:
    async with running_web(database_url, DebateScript().llm(), runs_debates=False) as web:
        ask = {"question": "Adopt ADR-7?"}
        first = await call(web, "POST", "/api/debates", ask, **{"Idempotency-Key": "k-1"})
        again = await call(web, "POST", "/api/debates", ask, **{"Idempotency-Key": "k-1"})
        other = await call(web, "POST", "/api/debates", ask, **{"Idempotency-Key": "k-2"})
        changed = await call(
            web,
            "POST",
            "/api/debates",
            {"question": "Something else?"},
            **{"Idempotency-Key": "k-1"},
        )

    assert (first[0], again[0], other[0]) == (201, 200, 201)
    assert first[1]["id"] == again[1]["id"] != other[1]["id"]
    assert changed[0] == 409
    assert "already asked debate" in changed[1]["error"]


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (b"{not json", 400, "the body is not JSON"),
        ([1, 2], 400, "send a JSON object"),
        ({}, 422, "question"),
        ({"question": "Adopt?", "colour": "red"}, 422, "colour"),
        ({"question": "Adopt?", "protocol": "chess"}, 422, "there is no protocol 'chess'"),
        ({"question": "Adopt?", "protocol": "panel", "rounds": 50}, 422, "at most 5 rounds"),
        ({"question": "Adopt?", "model": "nonsense"}, 422, "is not `provider:model`"),
    ],
)
async def test_a_bad_request_is_refused_as_json_with_its_status(
    database_url: str, body: Any, status: int, said: str
) -> None:
    async with running_web(database_url, DebateScript().llm(), runs_debates=False) as web:
        answered, error = await call(web, "POST", "/api/debates", body)
        listed = await call(web, "GET", "/api/debates")
    assert answered == status
    assert said in error["error"]
    assert listed[1]["debates"] == []


async def test_the_other_refusals_have_their_status(database_url: str) -> None:
    async with running_web(
        database_url, DebateScript().llm(), runs_debates=False, max_debates_per_channel=1
    ) as web:
        assert (await call(web, "GET", "/api/debates/999"))[0] == 404
        unknown = await call(web, "GET", "/api/debates/999/events")
        assert unknown[0] == 404
        form = await call(
            web, "POST", "/api/debates", b"question=x", **{"content-type": "text/plain"}
        )
        assert form[0] == 415
        assert (await call(web, "POST", "/api/debates", {"question": "One?"}))[0] == 201
        limited, said = await call(web, "POST", "/api/debates", {"question": "Two?"})
        huge, too_large = await call(web, "POST", "/api/debates", {"question": "x" * 3_000_000})
    assert limited == 429
    assert "DEBATEBOT_MAX_DEBATES_PER_CHANNEL=1" in said["error"]
    assert "asked outside Slack" in said["error"]
    assert huge == 413
    assert "larger than" in too_large["error"]


async def test_the_api_wants_the_token_when_one_is_set(database_url: str) -> None:
    token = "a-long-random-web-token-for-tests"
    async with running_web(database_url, DebateScript().llm(), token=token) as web:
        refused = await call(web, "GET", "/api/debates")
        wrong = await call(web, "GET", "/api/debates", authorization="Bearer not-it")
        allowed = await call(web, "GET", "/api/debates", authorization=f"Bearer {token}")
        page = await call(web, "GET", "/")
    assert refused[0] == wrong[0] == 401
    assert "Authorization: Bearer" in refused[1]["error"]
    assert allowed[0] == 200
    assert page[0] == 200
    assert "Sign in" in page[1]
    assert token not in page[1]


async def test_the_event_stream_sends_each_turn_then_the_end_and_resumes(database_url: str) -> None:
    async with running_web(database_url, DebateScript().llm()) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        debate_id = created["id"]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{web.url}/api/debates/{debate_id}/events") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                text = (await stream.read()).decode()
            async with http.get(
                f"{web.url}/api/debates/{debate_id}/events", headers={"Last-Event-ID": "3"}
            ) as stream:
                resumed = (await stream.read()).decode()
    events = [block for block in text.split("\n\n") if block.strip()]
    turns = [json.loads(e.split("data: ", 1)[1]) for e in events if "event: turn" in e]
    assert [t["seq"] for t in turns] == list(range(len(turns)))
    assert "event: end" in events[-1]
    ended = json.loads(events[-1].split("data: ", 1)[1])
    assert ended["state"] == "finished"
    assert len(ended["turns"]) == len(turns)
    resumed_ids = [int(line[4:]) for line in resumed.splitlines() if line.startswith("id: ")]
    assert resumed_ids == list(range(4, len(turns)))


async def test_an_escalated_verdict_is_approved_over_http_as_slack_records_it(
    database_url: str,
) -> None:
    script = DebateScript(moderator=[reply_for("moderator", confidence_level="LOW")])
    async with running_web(database_url, script.llm(), escalation_threshold=0.99) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        debate_id = created["id"]
        found = await finished(web, debate_id)
        assert found["review"]["state"] == "open"
        # The confidence line says which threshold applied (issue 48), as Slack's verdict does.
        held = "threshold 0.99: the deployment's fixed threshold"
        assert found["verdict"]["threshold_line"] == held
        assert (found["verdict"]["threshold"], found["verdict"]["threshold_source"]) == (
            0.99,
            "fixed",
        )
        page = await call(web, "GET", f"/debates/{debate_id}")
        assert held.replace("'", "&#39;") in page[1]
        bad = await call(web, "POST", f"/api/debates/{debate_id}/review", {"decision": "maybe"})
        decided = await call(
            web, "POST", f"/api/debates/{debate_id}/review", {"decision": "approve", "note": "ok"}
        )
        twice = await call(web, "POST", f"/api/debates/{debate_id}/review", {"decision": "reject"})
        audit = await call(web, "GET", f"/api/debates/{debate_id}/audit")
        receipt = await call(web, "GET", f"/api/debates/{debate_id}/export?format=receipt")
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            [review] = session.exec(select(Review)).all()
            parts = receipt_parts(session, debate_id=debate_id)
    assert bad[0] == 422
    assert decided[0] == 200
    assert decided[1]["state"] == "approved"
    assert twice[0] == 409
    assert (review.reviewer, review.decision, review.note) == ("web", "approved", "ok")
    assert len(parts) == 2, "the debate's receipt and the signed decision joined to it"
    assert audit[1]["ok"] is True
    assert receipt[0] == 200


async def test_a_debate_asked_on_the_web_is_held_to_the_workspaces_adopted_threshold(
    database_url: str,
) -> None:
    """A threshold adopted with the weights (`calibration adopt --threshold guaranteed`) holds
    every door's debates, the web's included, and the verdict says it applied."""
    async with running_web(database_url, DebateScript().llm()) as web:
        with session_scope(web.engine, workspace=PENDING_WORKSPACE) as session:
            thresholds.adopt_threshold(
                session,
                source=ThresholdSource.GUARANTEED,
                threshold=0.97,
                version="default-1",
                by="UADMIN",
            )
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        found = await finished(web, created["id"])
    verdict = found["verdict"]
    assert verdict["threshold_line"] == (
        "threshold 0.97: the guaranteed threshold adopted with the weights"
    )
    assert verdict["escalate"] is (verdict["confidence"] < 0.97)


async def test_the_openapi_description_matches_the_routes_and_answers(database_url: str) -> None:
    async with running_web(database_url, DebateScript().llm(), runs_debates=False) as web:
        status, served = await call(web, "GET", "/openapi.json")
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt?"})
    assert status == 200
    assert served == json.loads(json.dumps(OPENAPI))
    assert served["openapi"].startswith("3.")
    routes = {
        route.path.replace(":int", "")
        for route in web.server.app.routes
        if isinstance(route, Route) and route.path.startswith("/api/")
    }
    assert routes == set(served["paths"])
    schemas = served["components"]["schemas"]
    for path in served["paths"].values():
        for operation in path.values():
            for answer in operation["responses"].values():
                for content in answer.get("content", {}).values():
                    ref = content["schema"].get("$ref", "")
                    assert not ref or ref.rsplit("/", 1)[1] in schemas, ref
    assert set(schemas["DebateOut"]["required"]) <= set(created)
    assert set(schemas["DebateIn"]["properties"]) == {
        "question",
        "protocol",
        "rounds",
        "budget_usd",
        "context",
        "model",
    }


async def test_the_public_keys_are_served_as_serve_serves_them_without_the_token(
    database_url: str, tmp_path: Any
) -> None:
    from bot.keyring import KeyRing

    keys = tmp_path / "receipt-keys"
    token = "a-long-random-web-token-for-tests"
    async with running_web(database_url, DebateScript().llm(), token=token) as web:
        before = await call(web, "GET", "/.well-known/debatebot-keys.json")
        KeyRing(keys).signer(create=True)
        after = await call(web, "GET", "/.well-known/debatebot-keys.json")
    assert before[0] == 404
    assert "DEBATEBOT_RECEIPT_KEYS_DIR" in before[1]["error"]
    assert after[0] == 200
    assert after[1] == KeyRing(keys).public_document()


async def test_the_debate_page_links_its_receipt_which_verifies_with_the_served_keys(
    database_url: str,
) -> None:
    """Issue 46 item 4: the web page of a finished debate links its receipt as downloadable
    JSON, and that receipt verifies with the public keys the same server serves."""
    async with running_web(database_url, DebateScript().llm()) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        await finished(web, created["id"])
        page = await call(web, "GET", f"/debates/{created['id']}")
        link = f"/debates/{created['id']}/export.json?format=receipt"
        receipt = await call(web, "GET", link)
        keys = await call(web, "GET", "/.well-known/debatebot-keys.json")
    assert page[0] == 200
    assert f'<a href="{link}" download>Download the receipt</a>' in page[1]
    assert (receipt[0], keys[0]) == (200, 200)
    assert verify(receipt[1], keys[1]).lines()[0] == "receipt VALID"


@pytest.fixture(autouse=True)
def _receipt_keys_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("DEBATEBOT_RECEIPT_KEYS_DIR", str(tmp_path / "receipt-keys"))


async def test_the_event_stream_shows_a_turn_being_written_before_it_is_stored(
    database_url: str,
) -> None:
    """With the debate run in this process, its turns' text as it is written is sent
    (`event: writing`): prose only, each before its stored turn."""
    llm = FunctionLLM(DebateScript(), stream_rate=StreamRate(tokens_per_s=200))
    async with running_web(database_url, llm) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        url = f"{web.url}/api/debates/{created['id']}/events"
        async with aiohttp.ClientSession() as http, http.get(url) as stream:
            text = (await stream.read()).decode()
    events = [block for block in text.split("\n\n") if block.strip()]
    kinds = [e.split("event: ", 1)[1].split("\n", 1)[0] for e in events if "event: " in e]
    writing = [json.loads(e.split("data: ", 1)[1]) for e in events if "event: writing" in e]
    critic_text = [w["text"] for now in writing for w in now if w["role"] == "critic"]
    thesis = reply_for("critic")["thesis"]
    assert critic_text, kinds
    assert all(thesis.startswith(t) or t.startswith(thesis) for t in critic_text)
    assert all("{" not in t and '"' not in t for t in critic_text)
    turns = [json.loads(e.split("data: ", 1)[1]) for e in events if "event: turn" in e]
    critic_turn = next(i for i, t in enumerate(turns) if t["role"] == "critic")
    first_critic_text = next(
        i for i, e in enumerate(events) if "event: writing" in e and '"critic"' in e
    )
    stored_critic = [i for i, e in enumerate(events) if "event: turn" in e][critic_turn]
    assert first_critic_text < stored_critic
    assert kinds[-1] == "end"
