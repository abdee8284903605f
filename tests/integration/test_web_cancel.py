"""Stopping a debate through `debatebot web` (issue 44): `POST /api/debates/{id}/cancel` and the
page's Stop button (a form with its CSRF field) ask as every door does (CancelSource.WEB); a
finished debate answers 409 saying it has finished. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re

import aiohttp

from bot.store import queue
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import DebateStatus
from tests.helpers import DebateScript
from tests.integration.test_web_api import call, finished
from tests.web_door import RunningWeb, running_web


async def running(web: RunningWeb, debate_id: int) -> None:
    for _ in range(600):
        _, found = await call(web, "GET", f"/api/debates/{debate_id}")
        if found["state"] == "running":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"debate {debate_id} never ran")


async def test_the_api_stops_a_running_debate_and_refuses_a_finished_one(
    database_url: str,
) -> None:
    llm = DebateScript().llm()
    llm.delay_s = 60  # every call outlasts the test unless the cancel abandons it
    async with running_web(database_url, llm) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        debate_id = created["id"]
        await running(web, debate_id)

        status, asked = await call(web, "POST", f"/api/debates/{debate_id}/cancel", b"")
        again = await call(web, "POST", f"/api/debates/{debate_id}/cancel", b"")
        found = await finished(web, debate_id)
        refused = await call(web, "POST", f"/api/debates/{debate_id}/cancel", b"")
        unknown = await call(web, "POST", "/api/debates/999999/cancel", b"")
        with session_scope(web.engine, workspace=EVERY_WORKSPACE) as session:
            debate = queue.get_debate(session, debate_id=debate_id)
    assert status == 202
    assert (asked["new_request"], asked["cancelled_from"], asked["cancelled_by"]) == (
        True,
        "web",
        "web",
    )
    assert again[0] == 202
    assert again[1]["new_request"] is False
    assert found["outcome"] == DebateStatus.CANCELLED.value
    assert debate.cancelled_from == CancelSource.WEB
    assert refused[0] == 409
    assert "has already finished (cancelled)" in refused[1]["error"]
    assert unknown[0] == 404


async def test_the_pages_stop_button_needs_its_csrf_field(database_url: str) -> None:
    llm = DebateScript().llm()
    llm.delay_s = 60
    async with running_web(database_url, llm) as web:
        _, created = await call(web, "POST", "/api/debates", {"question": "Adopt ADR-7?"})
        debate_id = created["id"]
        await running(web, debate_id)
        # unsafe: keep cookies of an IP address (127.0.0.1), as a browser does.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            async with browser.get(f"{web.url}/debates/{debate_id}") as page:
                html = await page.text()
            assert f'action="/debates/{debate_id}/cancel"' in html
            field = re.search(r'name="csrf" value="([^"]+)"', html)
            assert field is not None
            forged = await browser.post(
                f"{web.url}/debates/{debate_id}/cancel", data={"csrf": "forged"}
            )
            assert forged.status == 403
            _, still = await call(web, "GET", f"/api/debates/{debate_id}")
            assert still["state"] == "running"
            pressed = await browser.post(
                f"{web.url}/debates/{debate_id}/cancel",
                data={"csrf": field[1]},
                allow_redirects=False,
            )
            assert pressed.status == 303
        found = await finished(web, debate_id)
    assert found["outcome"] == DebateStatus.CANCELLED.value
