"""The playground in a real browser (issue 43): Debian's headless Chromium, driven by Playwright,
against `debatebot web` on a fake model. Asking, watching the turns arrive, a reload in the
middle, the verdict, an approval, the audit; phone width, the keyboard, and hostile text. Any
console error fails the test. Screenshots land in the test's folder."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright

from bot.store import queue
from bot.store.db import session_scope
from bot.store.tenancy import PENDING_WORKSPACE
from engine.llm import LLMRequest
from engine.providers.fake import FunctionLLM
from tests.helpers import DebateScript, reply_for
from tests.web_door import RunningWeb, running_web

CHROMIUM = os.environ.get("DEBATEBOT_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = (
    '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
    ' <a href="javascript:window.__pwned = 3">click me</a>'
)
# The README's picture is taken again only when asked (DEBATEBOT_TEST_README_SHOT=1), so a
# test run leaves the checkout as it was; every run's screenshots stay in the test's folder.
README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "playground.png"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not await asyncio.to_thread(Path(CHROMIUM).exists):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: run the tests through scripts/test, which installs"
            " Debian's chromium package (apt-get install chromium)"
        )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        await launched.close()


class Watched:
    """A page whose console errors and uncaught exceptions are kept, to fail the test."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


async def new_page(browser: Browser, **options: Any) -> Watched:
    context = await browser.new_context(**options)
    return Watched(await context.new_page())


def gated_script(gate: asyncio.Event, **moderator: Any) -> FunctionLLM:
    """The canned debate, whose moderator answers only once `gate` is set."""

    async def held(_request: LLMRequest) -> dict[str, Any]:
        await gate.wait()
        return reply_for("moderator", **moderator)

    return FunctionLLM(DebateScript(moderator=[held]))


def state_of(web: RunningWeb, debate_id: int) -> str:
    with session_scope(web.engine, workspace=PENDING_WORKSPACE) as session:
        return queue.get_debate(session, debate_id=debate_id).state.value


async def keyboard_to(page: Page, element_id: str) -> None:
    """Tab until `element_id` has the focus, as a person without a mouse would."""
    for _ in range(30):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return
    raise AssertionError(f"#{element_id} cannot be reached with the Tab key")


async def test_ask_watch_reload_decide_and_verify_in_the_browser(
    browser: Browser, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    llm = gated_script(gate, confidence_level="LOW", synthesis="Adopt it, with a fallback.")
    url = f"sqlite:///{tmp_path / 'web.sqlite3'}"
    async with running_web(url, llm, escalation_threshold=0.99) as web:
        watched = await new_page(browser, viewport={"width": 1100, "height": 900})
        page = watched.page
        await page.goto(web.url + "/")
        await keyboard_to(page, "question")
        await page.keyboard.type("Should we move the job queue to PostgreSQL?")
        await page.fill("#context", "# ADR-042: Queue on PostgreSQL\nWe use SKIP LOCKED.")
        await keyboard_to(page, "start")
        await page.keyboard.press("Enter")
        await page.wait_for_url("**/debates/*")
        debate_id = int(page.url.rsplit("/", 1)[1])

        # The turns before the moderator's arrive while the moderator is still held.
        await page.wait_for_selector("#turns li >> nth=2")
        assert state_of(web, debate_id) == "running"
        assert await page.locator("#verdict").count() == 0
        await page.screenshot(path=str(tmp_path / "live.png"), full_page=True)

        await page.reload()
        shown = await page.locator("#turns li").count()
        assert shown >= 3, "a reload shows the turns stored so far"
        assert await page.locator("#live").is_visible()

        gate.set()
        await page.wait_for_selector("#verdict", timeout=60_000)
        assert "Verdict: revise" in await page.inner_text("#verdict-title")
        assert "Adopt it, with a fallback." in await page.inner_text("#verdict")
        assert "judges agree" in await page.inner_text(".confidence")
        assert await page.locator("#turns li").count() > shown
        await page.screenshot(path=str(tmp_path / "verdict.png"), full_page=True)
        if os.environ.get("DEBATEBOT_TEST_README_SHOT") == "1":
            await page.screenshot(path=str(README_SHOT), full_page=False)

        await page.fill("#note", "Agreed in the architecture review.")
        await page.click("button[value=approve]")
        await page.wait_for_selector("#review-state")
        assert "approved by web" in await page.inner_text("#review-state")

        await page.click("#verify")
        await page.wait_for_selector("#audit-result")
        assert "Audit chain verified" in await page.inner_text("#audit-result")
        async with page.expect_download() as download:
            await page.click("text=Download the export")
        saved = tmp_path / "export.json"
        await (await download.value).save_as(saved)
        assert f'"id": {debate_id}' in saved.read_text(encoding="utf-8")

        await page.goto(web.url + "/")
        listed = await page.inner_text("table.debates")
        assert "revise" in listed
        assert "$0.0000" in listed
        await page.screenshot(path=str(tmp_path / "list.png"), full_page=True)
    assert watched.errors == []


async def test_hostile_text_stays_text_at_phone_width(browser: Browser, tmp_path: Path) -> None:
    llm = FunctionLLM(DebateScript(moderator=[reply_for("moderator", synthesis=HOSTILE)]))
    url = f"sqlite:///{tmp_path / 'web.sqlite3'}"
    async with running_web(url, llm) as web:
        watched = await new_page(browser, viewport={"width": 375, "height": 740}, is_mobile=True)
        page = watched.page
        await page.goto(web.url + "/")
        assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        await page.fill("#question", f"Adopt this? {HOSTILE}")
        await page.click("#start")
        await page.wait_for_url("**/debates/*")
        await page.wait_for_selector("#verdict", timeout=60_000)
        await page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)

        assert HOSTILE in await page.inner_text(".question")
        assert HOSTILE in await page.inner_text(".synthesis")
        assert await page.evaluate("window.__pwned") is None
        assert await page.locator("main script, main img, a[href^='javascript:']").count() == 0
        assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        await page.click("text=click me")  # text in a paragraph: nothing happens
        assert await page.evaluate("window.__pwned") is None
    assert watched.errors == []
