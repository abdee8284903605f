"""The playground's forms and `debatebot web --no-worker` (issue 43) on SQLite and PostgreSQL: a
document uploaded with the question becomes the debate's context, one past Slack's upload limit
is refused; every form (ask, review, sign in) is refused without the browser's CSRF value; the
model menu shows the catalogue's prices; and beside a worker elsewhere, the page's event stream
follows the debate that worker runs."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from sqlmodel import select

from bot.slackweb.files import MAX_UPLOAD_BYTES
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.store.review_tables import Escalation
from bot.store.tenancy import EVERY_WORKSPACE
from bot.wiring import build_services, build_worker
from engine.models import DebateSpec
from tests.helpers import DebateScript, reply_for
from tests.web_door import RunningWeb, running_web

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def browser() -> aiohttp.ClientSession:
    """A client that keeps the page's cookies (the CSRF cookie is set for 127.0.0.1)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def form_value(http: aiohttp.ClientSession, url: str) -> str:
    """The CSRF value the page at `url` puts in its forms (its cookie is kept by `http`)."""
    async with http.get(url) as answer:
        found = CSRF.search(await answer.text())
    assert found is not None
    return found.group(1)


async def post(
    http: aiohttp.ClientSession, url: str, data: aiohttp.FormData | dict[str, str]
) -> tuple[int, str, str]:
    """(status, where it redirects, the page) of a form posted without following redirects."""
    async with http.post(url, data=data, allow_redirects=False) as answer:
        return answer.status, answer.headers.get("location", ""), await answer.text()


def debates(web: RunningWeb) -> list[Debate]:
    with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
        return list(session.exec(select(Debate)))


async def test_an_uploaded_document_is_the_debates_context_and_one_too_large_is_refused(
    database_url: str,
) -> None:
    web_door = running_web(database_url, DebateScript().llm(), runs_debates=False)
    async with web_door as web, browser() as http:
        csrf = await form_value(http, web.url + "/")
        form = aiohttp.FormData({"question": "Adopt ADR-9?", "csrf": csrf})
        form.add_field("documents", b"# ADR-9\nWe queue on PostgreSQL.", filename="adr-9.md")
        asked = await post(http, web.url + "/debates", form)

        too_large = aiohttp.FormData({"question": "And this one?", "csrf": csrf})
        too_large.add_field("documents", b"a" * (MAX_UPLOAD_BYTES + 1), filename="big.md")
        refused = await post(http, web.url + "/debates", too_large)

    assert asked[0] == 303
    [debate] = debates(web)
    assert asked[1] == f"/debates/{debate.id}"
    context = DebateSpec.model_validate_json(debate.spec_json).context
    assert [(d.title, d.text) for d in context] == [
        ("adr-9.md", "# ADR-9\nWe queue on PostgreSQL.")
    ]
    assert refused[0] == 413
    assert "`big.md` is 500 KB and I read at most 500 KB" in refused[2]
    assert len(debates(web)) == 1


async def test_every_form_is_refused_without_the_browsers_csrf_value(database_url: str) -> None:
    script = DebateScript(moderator=[reply_for("moderator", confidence_level="LOW")])
    web_door = running_web(database_url, script.llm(), escalation_threshold=0.99)
    async with web_door as web, browser() as http:
        csrf = await form_value(http, web.url + "/")
        forged = await post(http, web.url + "/debates", {"question": "Adopt?"})
        wrong = await post(http, web.url + "/debates", {"question": "Adopt?", "csrf": csrf[::-1]})
        assert debates(web) == []
        asked = await post(http, web.url + "/debates", {"question": "Adopt?", "csrf": csrf})
        debate_id = int(asked[1].rsplit("/", 1)[1])
        async with http.get(f"{web.url}/api/debates/{debate_id}/events") as stream:
            await stream.read()  # to the end of the debate
        unreviewed = await post(
            http, f"{web.url}/debates/{debate_id}/review", {"decision": "approve"}
        )
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            [escalation] = session.exec(select(Escalation))
    assert (forged[0], wrong[0], unreviewed[0]) == (403, 403, 403)
    assert "this form is out of date or came from another site" in forged[2]
    assert asked[0] == 303
    assert escalation.state == "open"

    token = "a-long-web-token-for-tests"
    async with running_web(database_url, script.llm(), token=token) as web, browser() as http:
        await form_value(http, web.url + "/login")
        signed_in = await post(http, web.url + "/login", {"token": token})
        async with http.get(web.url + "/", allow_redirects=False) as home:
            still_out = home.status
    assert signed_in[0] == 403
    assert still_out == 303  # to the sign-in page: no session was given


async def test_the_model_menu_shows_the_catalogues_prices(database_url: str) -> None:
    web_door = running_web(database_url, DebateScript().llm(), runs_debates=False)
    async with web_door as web, aiohttp.ClientSession() as http, http.get(web.url + "/") as answer:
        page = await answer.text()
    assert '<option value="">the deployment&#39;s models (fake)</option>' in page
    priced = re.findall(
        r'<option value="(\w+:[\w.-]+)" disabled>\1 · \$[\d.]+ / \$[\d.]+ per MTok \(no key set\)',
        page,
    )
    assert len(priced) >= 5


async def followed(url: str) -> AsyncIterator[dict[str, Any]]:
    """The events of the stream at `url`, as (event, data) dicts, until it ends."""
    async with aiohttp.ClientSession() as http, http.get(url) as stream:
        text = (await stream.read()).decode()
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            yield {"event": lines["event"], "data": json.loads(lines["data"])}


async def test_beside_a_worker_the_page_follows_the_debate_it_runs(database_url: str) -> None:
    """`debatebot web --no-worker`: the door queues and never runs; a worker elsewhere (its own
    services, the same database) runs the debate, and the event stream reads each stored turn
    and the end from the store."""
    llm = DebateScript().llm()
    async with running_web(database_url, llm, runs_debates=False) as web:
        ask = {"question": "Adopt?"}
        async with (
            aiohttp.ClientSession() as http,
            http.post(web.url + "/api/debates", json=ask) as made,
        ):
            debate_id = (await made.json())["id"]
        events = asyncio.create_task(
            _collect(followed(f"{web.url}/api/debates/{debate_id}/events"))
        )
        await asyncio.sleep(0.3)
        assert not events.done()
        assert [d.state for d in debates(web)] == ["queued"], "the web door ran nothing"
        services = build_services(web.settings, resolve_llm=lambda _model: llm)
        try:
            elsewhere = build_worker(services, web.engine, worker_id="elsewhere/worker")
            assert await elsewhere.run_once()
        finally:
            await services.aclose()
        seen = await asyncio.wait_for(events, 30)
    turns = [e["data"] for e in seen if e["event"] == "turn"]
    assert [t["seq"] for t in turns] == list(range(len(turns)))
    assert len(turns) >= 5
    assert seen[-1]["event"] == "end"
    assert seen[-1]["data"]["state"] == "finished"


async def _collect(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event async for event in events]
