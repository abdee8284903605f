"""Something between the bot and Slack answers with a redirect (Slack documents none for any Web
API method): a 302 or 307 to another path of Slack's own origin, where a followed request would
keep its Authorization header, or to another origin. The bot follows none. An owed message is
not sent again along the redirect but kept and delivered once Slack answers; an install whose
code exchange is redirected fails with a page saying why, its secret and code sent nowhere
else; a token renewal that is redirected keeps the token and its refresh token as they were."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import pytest

from tests.e2e.conftest import BOT_TOKEN, CHANNEL, Bot, BotFactory
from tests.e2e.host_emulators import OtherHost
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_oauth_installs import (
    Browser,
    find,
    install,
    open_home,
    published_times,
    published_with,
    start_many,
    store,
    tenancy,
)
from tests.e2e.test_slack_failures import THREAD_TEXTS, texts


@pytest.fixture
async def other() -> AsyncIterator[OtherHost]:
    """Another origin, recording whatever a followed redirect would bring it."""
    host = OtherHost(body=b'{"ok": true}')
    await host.start()
    yield host
    await host.stop()


def nothing_followed(bot: Bot, other: OtherHost) -> None:
    assert bot.emulator.moved == [], "nothing reached the other path of Slack's origin"
    assert other.requests == [], "nothing reached the other origin"
    assert other.bodies == []


async def test_a_redirected_message_is_kept_and_delivered_later_never_sent_along(
    start_bot: BotFactory, other: OtherHost, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    caplog.set_level(logging.WARNING, logger="bot")
    # The parent goes out; the first round is answered 307 to another path of Slack's origin
    # (its token and body would go along), then 302 to another origin.
    bot.emulator.fail(
        "chat.postMessage",
        None,
        Fault(status=307, redirect=f"{bot.emulator.moved_url}api/chat.postMessage"),
        Fault(status=302, redirect=f"{other.url}/api/chat.postMessage"),
    )

    await bot.driver.command("Should we adopt ADR-042?")

    [debate] = await bot.finished(limit_s=90)
    assert debate.thread_ts is not None
    assert texts(bot.emulator.in_thread(CHANNEL, debate.thread_ts)) == THREAD_TEXTS
    nothing_followed(bot, other)
    redirected = [
        c for c in bot.emulator.calls_of("chat.postMessage", ok_only=False) if c.status != 200
    ]
    assert [(c.status, c.token) for c in redirected] == [(307, BOT_TOKEN), (302, BOT_TOKEN)]
    reasons = [r.getMessage() for r in caplog.records if "round:1 not delivered" in r.getMessage()]
    assert [r.split(", which ")[0] for r in reasons] == [
        f"debate 1: round:1 not delivered (redirected: Slack's answer to chat_postMessage in"
        f" {CHANNEL} was a redirect to {where.removeprefix('http://')}"
        for where in (bot.emulator.url, other.url)
    ]
    assert all("check DEBATEBOT_SLACK_API_URL and any proxy on the way" in r for r in reasons)


async def test_a_redirected_code_exchange_fails_the_install_with_a_page_and_sends_nothing_on(
    start_bot: BotFactory, other: OtherHost
) -> None:
    bot = await start_many(start_bot)
    redirects = [
        Fault(status=302, redirect=f"{other.url}/api/oauth.v2.access"),
        Fault(status=307, redirect=f"{bot.emulator.moved_url}api/oauth.v2.access"),
    ]
    for fault, where in zip(redirects, (other.url, bot.emulator.url), strict=True):
        bot.emulator.fail("oauth.v2.access", fault)
        browser = Browser(bot)
        try:
            status, page = await browser.install("T2")
        finally:
            await browser.close()

        assert status == 502, page
        assert "debatebot was not installed" in page
        assert f"a redirect to {where.removeprefix('http://')}, and the bot follows no" in page
        assert "DEBATEBOT_SLACK_API_URL" in page
        assert 'href="/slack/install"' in page
        assert await find(bot, "T2") is None, "nothing was saved"

    nothing_followed(bot, other)
    assert tenancy(bot).exchanges == [], "Slack itself was never asked"
    assert [c.status for c in bot.emulator.calls_of("oauth.v2.access", ok_only=False)] == [302, 307]

    # Once nothing rewrites Slack's answers, installing again works.
    await install(bot, "T2")
    assert (await find(bot, "T2")).bot_token in tenancy(bot).tokens_of("T2")


async def test_a_redirected_renewal_keeps_the_token_and_its_refresh_token(
    start_bot: BotFactory, other: OtherHost
) -> None:
    bot = await start_many(start_bot, rotation=True)
    await install(bot, "T2")
    installed = await find(bot, "T2")
    # The token is due for renewal (it expires within the two hours Bolt renews ahead) but
    # still good.
    installed.bot_token_expires_at = int(time.time()) + 30 * 60
    await store(bot).async_save_bot(installed)
    bot.emulator.fail(
        "oauth.v2.access",
        Fault(status=307, redirect=f"{bot.emulator.moved_url}api/oauth.v2.access"),
    )

    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(published_times(bot, "UBOB", 1), "App Home")

    assert published_with(bot, "UBOB") == [installed.bot_token], "the old token, still good"
    kept = await find(bot, "T2")
    assert (kept.bot_token, kept.bot_refresh_token) == (
        installed.bot_token,
        installed.bot_refresh_token,
    )
    assert installed.bot_refresh_token in tenancy(bot).refresh_tokens, "not spent"
    assert tenancy(bot).exchanges[1:] == [], "the renewal never reached Slack"
    nothing_followed(bot, other)

    # The next request renews with the same refresh token.
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(published_times(bot, "UBOB", 2), "App Home")
    [renewal] = tenancy(bot).exchanges[1:]
    assert renewal["refresh_token"] == installed.bot_refresh_token
    assert renewal["error"] is None
    renewed = await find(bot, "T2")
    assert renewed.bot_token != installed.bot_token
    assert published_with(bot, "UBOB")[-1] == renewed.bot_token
