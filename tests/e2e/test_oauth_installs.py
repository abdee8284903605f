"""Many workspaces on one deployment, end to end: the app is installed through `/slack/install`,
Slack's authorize page and `/slack/oauth_redirect` (the emulator's `oauth.v2.access`); each
workspace's requests act with that workspace's own bot token (renewed by token rotation when it
expires); uninstalling one deletes its tokens and refuses its requests while the other goes on,
and installing it again resumes it. An org-wide Enterprise Grid install serves every workspace
of its org.

What a request of a workspace is authorized with is seen here through what Bolt's own client does
with it (App Home's `views.publish`); deliveries with each workspace's token, and what an
uninstall does to its debates, are in test_workspaces.py and test_workspace_isolation.py."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from pydantic import SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlmodel import select

from bot.settings import Settings, SettingsError
from bot.slack.installs import NOT_INSTALLED, UNRENEWED
from bot.slackweb.installations import DatabaseInstallationStore
from bot.store import installations
from bot.store.cipher import TokenCipher
from bot.store.db import session_scope
from bot.store.installation_tables import InstallationEventKind, SlackBot
from bot.store.tenancy import EVERY_WORKSPACE
from bot.wiring import build_installs
from tests.e2e.conftest import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Bot, BotFactory
from tests.e2e.slack_emulator import BOT_ID, BOT_USER, Fault, SlackEmulator
from tests.e2e.slack_workspaces import CLIENT_ID, CLIENT_SECRET, Workspaces

KEY = "7d1f0c2a9b8e4d3c6a5f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
OTHER = "C2DEBATE"
OAUTH = {
    "slack_client_id": CLIENT_ID,
    "slack_client_secret": CLIENT_SECRET,
    "token_encryption_key": KEY,
}


async def start_many(start_bot: BotFactory, *, rotation: bool = False, **options: Any) -> Bot:
    """The bot in OAuth mode; the emulator has T1 (installed by hand with the environment's bot
    token) and T2, and in Enterprise Grid org E1, T5 and T6."""
    bot = await start_bot(**OAUTH, **options)
    tenancy = Workspaces(redirect_url=f"{bot.driver.bot_url}/slack/oauth_redirect")
    tenancy.add("T1", channels={CHANNEL}, token=BOT_TOKEN, bot_user_id=BOT_USER, bot_id=BOT_ID)
    tenancy.add("T2", channels={OTHER})
    tenancy.add("T5", channels={"C5"}, enterprise_id="E1")
    tenancy.add("T6", channels={"C6"}, enterprise_id="E1")
    tenancy.rotation = rotation
    bot.emulator.tenancy = tenancy
    return bot


def tenancy(bot: Bot) -> Workspaces:
    assert bot.emulator.tenancy is not None
    return bot.emulator.tenancy


def store(bot: Bot) -> DatabaseInstallationStore:
    return DatabaseInstallationStore(engine=bot.engine, cipher=TokenCipher(KEY.encode()))


class Browser:
    """A person's browser: keeps the bot's state cookie itself (it is `Secure`, and these pages
    are served over plain HTTP) and follows no redirect on its own."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.cookie = ""
        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())

    async def get(self, url: str, **params: str) -> tuple[int, dict[str, str], str]:
        headers = {"Cookie": self.cookie} if self.cookie else {}
        async with self.session.get(
            url, params=params or None, headers=headers, allow_redirects=False
        ) as reply:
            if "Set-Cookie" in reply.headers:
                self.cookie = reply.headers["Set-Cookie"].split(";")[0]
            return reply.status, dict(reply.headers), await reply.text()

    async def install_page(self, team: str) -> str:
        """The Add to Slack page's link to Slack's authorize page."""
        status, _, page = await self.get(f"{self.bot.driver.bot_url}/slack/install", team=team)
        assert status == 200
        assert "Add to Slack" in page
        link = re.search(r'<a href="([^"]+)"', page)
        assert link is not None
        return html.unescape(link.group(1))

    async def approve(self, link: str, **extra: str) -> str:
        """Slack's authorize page, the person approving: where Slack sends them back."""
        status, headers, body = await self.get(link + "&" + urlencode(extra) if extra else link)
        assert status == 302, body
        return headers["Location"]

    async def install(self, team: str, **extra: str) -> tuple[int, str]:
        back = await self.approve(await self.install_page(team), **extra)
        status, _, page = await self.get(back)
        return status, page

    async def close(self) -> None:
        await self.session.close()


async def install(bot: Bot, team: str, **extra: str) -> None:
    browser = Browser(bot)
    try:
        status, page = await browser.install(team, **extra)
    finally:
        await browser.close()
    assert status == 200, page


def outer(team: str, event: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "token": "unused",
        "team_id": team,
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": f"Ev{time.time_ns()}",
        "event_time": int(time.time()),
        "event": event,
        **more,
    }


async def post_event(bot: Bot, body: dict[str, Any]) -> int:
    reply = await bot.driver.send(json.dumps(body), "application/json")
    return reply.status


async def open_home(bot: Bot, team: str, user: str, **more: Any) -> int:
    event = {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": "home"}
    return await post_event(bot, outer(team, {**event, "event_ts": "1.0"}, **more))


async def command(bot: Bot, team: str, channel: str, text: str, user: str, **more: str) -> int:
    body = bot.driver.command_body(text, user=user, channel=channel)
    fields = {k: v[0] for k, v in parse_qs(body).items()}
    fields["team_id"] = team
    fields.update(more)
    reply = await bot.driver.send(urlencode(fields), "application/x-www-form-urlencoded")
    return reply.status


def published_with(bot: Bot, user: str) -> list[str]:
    """The tokens of every App Home published for `user`, in order."""
    return [
        call.token
        for call in bot.emulator.calls_of("views.publish")
        if call.params.get("user_id") == user
    ]


def published_times(bot: Bot, user: str, times: int) -> Callable[[], bool]:
    return lambda: len(published_with(bot, user)) == times


async def find(bot: Bot, team: str | None, enterprise: str | None = None) -> Any:
    return await store(bot).async_find_bot(enterprise_id=enterprise, team_id=team)


async def test_two_workspaces_install_and_each_acts_with_its_own_token(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot)
    browser = Browser(bot)
    try:
        link = await browser.install_page("T2")
        query = parse_qs(urlsplit(link).query)
        assert link.startswith(f"{bot.emulator.url}/oauth/v2/authorize?")
        assert query["client_id"] == [CLIENT_ID]
        assert "chat:write" in query["scope"][0].split(",")
        assert query["team"] == ["T2"]
        assert browser.cookie == f"slack-app-oauth-state={query['state'][0]}"
        back = await browser.approve(link)
        assert parse_qs(urlsplit(back).query)["state"] == query["state"]
        status, _, page = await browser.get(back)
        assert status == 200, page
    finally:
        await browser.close()
    await install(bot, "T1")

    [exchange, _] = tenancy(bot).exchanges
    assert exchange["error"] is None
    first, second = await find(bot, "T1"), await find(bot, "T2")
    assert first.bot_token == BOT_TOKEN
    assert first.bot_user_id == BOT_USER
    [t2_token] = tenancy(bot).tokens_of("T2")
    assert second.bot_token == t2_token != BOT_TOKEN
    assert second.bot_user_id == "UBT2"
    assert second.bot_id == "BBT2", "the flow asked auth.test for the bot's id"
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        rows = session.exec(select(SlackBot)).all()
        assert {row.installation for row in rows} == {"-:T1", "-:T2"}
        assert all(
            row.bot_token_enc.startswith("v1.") and "xoxb" not in row.bot_token_enc for row in rows
        ), "tokens are sealed at rest"

    # Each workspace's App Home is published with its own workspace's token.
    assert await open_home(bot, "T1", "UALICE") == 200
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(lambda: published_with(bot, "UBOB"), "T2's App Home")
    await bot.wait_for(lambda: published_with(bot, "UALICE"), "T1's App Home")
    assert published_with(bot, "UALICE") == [BOT_TOKEN]
    assert published_with(bot, "UBOB") == [t2_token]

    # T1 debates as before (its deliveries use its stored token, the environment's).
    await command(bot, "T1", CHANNEL, "Should we adopt ADR-042?", "UALICE")
    [debate] = await bot.finished(1)
    assert debate.outcome is not None
    posts = [c for c in bot.emulator.calls_of("chat.postMessage") if c.params["channel"] == CHANNEL]
    assert posts
    assert {c.token for c in posts} == {BOT_TOKEN}

    # A workspace where the app is not installed is told so, and nothing is queued.
    bot.emulator.tenancy.add("T3", channels={"C3"})  # type: ignore[union-attr]
    assert await command(bot, "T3", "C3", "Should we?", "UCAROL") == 200
    answer = await bot.wait_for(
        lambda: [r for r in bot.emulator.responses if "not installed" in r.get("text", "")],
        "the refusal",
    )
    assert answer[0]["text"] == NOT_INSTALLED
    assert len(bot.debates()) == 1


async def test_installing_again_updates_the_install_and_the_state_is_single_use(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot)
    await install(bot, "T2", as_user="UFIRST")
    [token] = tenancy(bot).tokens_of("T2")
    await install(bot, "T2", as_user="USECOND")
    assert tenancy(bot).tokens_of("T2") == [token], "Slack kept the install's bot token"
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        assert len(session.exec(select(SlackBot)).all()) == 1
        history = installations.events(session, enterprise_id=None, team_id="T2")
    assert [(e.kind, e.user_ids) for e in history] == [
        (InstallationEventKind.INSTALLED, ["UFIRST"]),
        (InstallationEventKind.INSTALLED, ["USECOND"]),
    ]
    latest = await store(bot).async_find_installation(enterprise_id=None, team_id="T2")
    assert latest is not None
    assert latest.user_id == "USECOND"
    assert latest.bot_token == token
    first = await store(bot).async_find_installation(
        enterprise_id=None, team_id="T2", user_id="UFIRST"
    )
    assert first is not None
    assert first.bot_token == token

    browser = Browser(bot)
    try:
        back = await browser.approve(await browser.install_page("T2"))
        issued = browser.cookie
        status, _, _ = await browser.get(back)
        assert status == 200
        # The same redirect again, cookie and all (a replay, a double click): the state was
        # used up.
        browser.cookie = issued
        status, _, page = await browser.get(back)
        assert status == 401
        assert "invalid_state" in page
        # A state this deployment never issued, with a cookie to match (a forged link).
        forged = re.sub(r"state=[^&]+", "state=forged0state", back)
        browser.cookie = "slack-app-oauth-state=forged0state"
        status, _, page = await browser.get(forged)
        assert status == 401
        assert "invalid_state" in page
        # A link begun in another browser (no cookie of its state).
        browser.cookie = ""
        status, _, page = await browser.get(back)
        assert status == 400
        assert "invalid_browser" in page

        # The person cancels on Slack's page: nothing is stored.
        link = await browser.install_page("T2")
        status, _, page = await browser.get(await browser.approve(link, deny="1"))
        assert "access_denied" in page

        # Slack refuses the exchange (a rotated client secret): the install fails, nothing
        # is saved, and the person is told.
        tenancy(bot).client_secret = "another0secret0a1b2c3d4e5f6a7b8c"
        status, page = await browser.install("T2", as_user="UTHIRD")
        assert status == 401
        assert "invalid_code" in page
        assert tenancy(bot).exchanges[-1]["error"] == "bad_client_secret"
    finally:
        await browser.close()
    latest = await store(bot).async_find_installation(enterprise_id=None, team_id="T2")
    assert latest is not None
    assert latest.user_id == "UINSTALLER", "the last install that passed; UTHIRD's did not"


async def test_rotation_renews_an_expired_token_and_saves_the_new_pair(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot, rotation=True)
    await install(bot, "T2")
    installed = await find(bot, "T2")
    assert installed.bot_token.startswith("xoxe.xoxb-")
    assert installed.bot_refresh_token.startswith("xoxe-")
    assert installed.bot_token_expires_at > time.time() + 11 * 3600
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(lambda: published_with(bot, "UBOB"), "App Home")
    assert published_with(bot, "UBOB") == [installed.bot_token], "not due: no renewal"

    async def twelve_hours_pass() -> None:
        """The token reaches its expiry: at Slack, and in what the bot stored."""
        current = await find(bot, "T2")
        tenancy(bot).expire(current.bot_token)
        current.bot_token_expires_at = int(time.time()) - 60
        await store(bot).async_save_bot(current)

    renewed: list[str] = []
    for round_ in (1, 2):
        before = await find(bot, "T2")
        await twelve_hours_pass()
        assert await open_home(bot, "T2", "UBOB") == 200
        await bot.wait_for(published_times(bot, "UBOB", round_ + 1), "App Home")
        after = await find(bot, "T2")
        assert after.bot_token != before.bot_token
        assert after.bot_refresh_token != before.bot_refresh_token
        assert after.bot_token_expires_at > time.time() + 11 * 3600
        assert published_with(bot, "UBOB")[-1] == after.bot_token
        assert before.bot_refresh_token not in tenancy(bot).refresh_tokens, "spent"
        renewed.append(after.bot_token)
    refreshes = [e for e in tenancy(bot).exchanges if e.get("grant_type") == "refresh_token"]
    assert [e["error"] for e in refreshes] == [None, None]
    assert len(set(renewed)) == 2

    # Slack refuses the refresh token (the install was revoked in between): the expired token
    # is not used, and the request is refused.
    tenancy(bot).refresh_tokens.clear()
    await twelve_hours_pass()
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(
        lambda: tenancy(bot).exchanges[-1]["error"] == "invalid_refresh_token", "the refusal"
    )
    assert len(published_with(bot, "UBOB")) == 3


async def test_a_token_slack_cannot_renew_now_is_an_outage_told_as_one_not_an_uninstall(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_many(start_bot, rotation=True)
    await install(bot, "T2")
    installed = await find(bot, "T2")
    # The token expired (at Slack and in the store), and Slack cannot renew it now.
    tenancy(bot).expire(installed.bot_token)
    installed.bot_token_expires_at = int(time.time()) - 60
    await store(bot).async_save_bot(installed)
    bot.emulator.fail_for("oauth.v2.access", Fault(status=503), 600)
    calls = len(bot.emulator.calls)

    # A command is told in its answer, which Slack shows the person (no call to Slack needed).
    body = bot.driver.command_body("Should we adopt ADR-042?", user="UBOB", channel=OTHER)
    fields = {**{k: v[0] for k, v in parse_qs(body).items()}, "team_id": "T2"}
    reply = await bot.driver.send(urlencode(fields), "application/x-www-form-urlencoded")
    assert (reply.status, reply.body) == (200, UNRENEWED)
    # A click on a message is told through its response_url, as Bolt tells NOT_INSTALLED.
    reply = await bot.driver.interaction(
        {
            "type": "block_actions",
            "team": {"id": "T2"},
            "user": {"id": "UBOB"},
            "api_app_id": "A1",
            "trigger_id": "trigger.t2",
            "channel": {"id": OTHER},
            "container": {"type": "message", "message_ts": "1.0"},
            "message": {"ts": "1.0", "text": "a verdict", "blocks": []},
            "response_url": f"{bot.driver.response_base}/act-t2",
            "actions": [{"action_id": "anything", "block_id": "b", "action_ts": "1.0"}],
        }
    )
    assert (reply.status, reply.body) == (200, "")
    [told] = [r for r in bot.emulator.responses if r.get("text") == UNRENEWED]
    assert told["response_type"] == "ephemeral"
    # An event cannot be told to anyone: it is answered 500, so Slack sends it again later.
    assert await open_home(bot, "T2", "UBOB") == 500

    assert not any(r.get("text") == NOT_INSTALLED for r in bot.emulator.responses)
    assert bot.debates() == [], "nothing was queued"
    assert not [c for c in bot.emulator.calls[calls:] if c.token == installed.bot_token]
    renewals = bot.emulator.calls_of("oauth.v2.access", ok_only=False)[-3:]
    assert [c.status for c in renewals] == [503, 503, 503], "each request asked Slack again"
    kept = await find(bot, "T2")
    assert kept.bot_refresh_token == installed.bot_refresh_token, "the pair is kept to retry"
    turned_away = [r for r in caplog.records if "was turned away" in r.getMessage()]
    assert len(turned_away) == 3
    assert all(r.levelname == "WARNING" for r in turned_away)
    assert all(
        r.getMessage().startswith("a request from -:T2 was turned away, nothing done: the bot")
        for r in turned_away
    )

    # Slack answers again: the next request renews the token and is served.
    bot.emulator.heal()
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(lambda: published_with(bot, "UBOB"), "App Home")
    renewed = await find(bot, "T2")
    assert renewed.bot_token != installed.bot_token
    assert published_with(bot, "UBOB") == [renewed.bot_token]


async def test_uninstalling_one_workspace_leaves_the_other_and_a_reinstall_resumes(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot)
    await install(bot, "T1")
    await install(bot, "T2")
    [old_token] = tenancy(bot).tokens_of("T2")

    revoked, uninstalled = tenancy(bot).uninstall("T2")
    assert await post_event(bot, revoked) == 200
    assert await post_event(bot, uninstalled) == 200
    assert await post_event(bot, uninstalled) == 200, "a redelivery is acknowledged"
    await bot.wait_for(lambda: _events(bot, "T2")[-1:] == [InstallationEventKind.UNINSTALLED], "")
    assert _events(bot, "T2") == [
        InstallationEventKind.INSTALLED,
        InstallationEventKind.TOKENS_REVOKED,
        InstallationEventKind.UNINSTALLED,
    ], "recorded once each"
    assert await find(bot, "T2") is None
    assert await store(bot).async_find_installation(enterprise_id=None, team_id="T2") is None
    assert (await find(bot, "T1")).bot_token == BOT_TOKEN

    # T2's requests find no install; T1's go on.
    calls = len(bot.emulator.calls)
    assert await command(bot, "T2", OTHER, "Should we?", "UBOB") == 200
    await bot.wait_for(
        lambda: any(r.get("text") == NOT_INSTALLED for r in bot.emulator.responses), "refusal"
    )
    assert await open_home(bot, "T2", "UBOB") == 200
    assert await open_home(bot, "T1", "UALICE") == 200
    await bot.wait_for(lambda: published_with(bot, "UALICE"), "T1's App Home")
    assert published_with(bot, "UBOB") == []
    assert not [c for c in bot.emulator.calls[calls:] if c.token == old_token]
    assert bot.debates() == []

    # Installed again, T2 works again with its new token.
    await install(bot, "T2")
    [new_token] = tenancy(bot).tokens_of("T2")
    assert new_token != old_token
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(lambda: published_with(bot, "UBOB"), "T2's App Home")
    assert published_with(bot, "UBOB") == [new_token]


def _events(bot: Bot, team: str) -> list[InstallationEventKind]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return [e.kind for e in installations.events(session, enterprise_id=None, team_id=team)]


async def test_an_org_wide_install_serves_every_workspace_of_its_org(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot)
    await install(bot, "T5", org="1")
    [org_token] = tenancy(bot).tokens_of(None, "E1")
    org = await find(bot, None, "E1")
    assert org.is_enterprise_install
    assert org.bot_token == org_token
    assert await find(bot, "T2") is None

    # Requests from both of the org's workspaces act with the org's token, whether or not the
    # request says it comes from an org-wide install.
    org_wide = {"enterprise_id": "E1", "is_enterprise_install": True}
    assert await open_home(bot, "T6", "UDAN", **org_wide) == 200
    assert await open_home(bot, "T5", "UEVE", enterprise_id="E1") == 200
    await bot.wait_for(lambda: published_with(bot, "UDAN"), "T6's App Home")
    await bot.wait_for(lambda: published_with(bot, "UEVE"), "T5's App Home")
    assert published_with(bot, "UDAN") == published_with(bot, "UEVE") == [org_token]

    for body in tenancy(bot).uninstall(None, "E1"):
        assert await post_event(bot, body) == 200
    await bot.wait_for(lambda: _org_events(bot)[-1:] == [InstallationEventKind.UNINSTALLED], "")
    assert await find(bot, None, "E1") is None
    assert await open_home(bot, "T6", "UDAN", **org_wide) == 200
    assert published_with(bot, "UDAN") == [org_token]


def org_wide(team: str) -> dict[str, Any]:
    """What Slack's event wrapper says of an event an org-wide install receives: the workspace
    it occurred in (`team_id`, `context_team_id`) and one authorization naming the org, with no
    team (Bolt then has no team for it)."""
    return {
        "enterprise_id": "E1",
        "context_team_id": team,
        "context_enterprise_id": "E1",
        "is_enterprise_install": True,
        "authorizations": [
            {
                "enterprise_id": "E1",
                "team_id": None,
                "user_id": BOT_USER,
                "is_bot": True,
                "is_enterprise_install": True,
            }
        ],
    }


def home_text(bot: Bot, user: str) -> str:
    """The last App Home published for `user`, as text."""
    [*_, last] = [
        call.params["view"]
        for call in bot.emulator.calls_of("views.publish")
        if call.params.get("user_id") == user
    ]
    return last if isinstance(last, str) else json.dumps(last)


async def test_an_org_wide_installs_events_and_commands_belong_to_the_workspace_they_come_from(
    start_bot: BotFactory,
) -> None:
    """An org-wide install serves each of its org's workspaces as that workspace: a debate asked
    by `/debate` in T6 is in T6's App Home opened by an event (whose authorization names only the
    org), and not in T5's. Scoped by the org instead, the event would see none of T6's rows."""
    bot = await start_many(start_bot)
    await install(bot, "T5", org="1")
    question = "Should T6 move its sessions to Postgres?"
    # A slash command names its workspace (`team_id`) and, from an org-wide install, the org.
    org = {"enterprise_id": "E1", "is_enterprise_install": "true"}
    assert await command(bot, "T6", "C6", question, "UDAN", **org) == 200
    await bot.wait_for(
        lambda: any("sessions to Postgres" in json.dumps(m) for m in bot.emulator.posted("C6")),
        "T6's debate",
    )

    assert await open_home(bot, "T6", "UDAN", **org_wide("T6")) == 200
    assert await open_home(bot, "T5", "UEVE", **org_wide("T5")) == 200
    await bot.wait_for(lambda: published_with(bot, "UDAN"), "T6's App Home")
    await bot.wait_for(lambda: published_with(bot, "UEVE"), "T5's App Home")

    # The feedback per protocol counts the workspace's debates.
    assert "`adversarial` \\u00b7 1 debate(s)" in home_text(bot, "UDAN")
    assert "debate(s)" not in home_text(bot, "UEVE")


def _org_events(bot: Bot) -> list[InstallationEventKind]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return [e.kind for e in installations.events(session, enterprise_id="E1", team_id=None)]


async def test_one_workspace_mode_records_an_uninstall_and_serves_no_install_pages(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    async with bot.driver.session.get(f"{bot.driver.bot_url}/slack/install") as reply:
        assert reply.status == 404
    assert await post_event(bot, outer("T1", {"type": "app_uninstalled"})) == 200
    await bot.wait_for(lambda: _events(bot, "T1"), "the record")
    assert _events(bot, "T1") == [InstallationEventKind.UNINSTALLED]


async def test_a_key_that_does_not_open_the_stored_tokens_stops_start_up(
    start_bot: BotFactory,
) -> None:
    bot = await start_many(start_bot)
    await install(bot, "T2")
    settings = Settings(
        slack_client_id=CLIENT_ID,
        slack_client_secret=SecretStr(CLIENT_SECRET),
        slack_signing_secret=SecretStr(SIGNING_SECRET),
        token_encryption_key=SecretStr("9" * 40),
    )
    oauth = settings.slack_oauth()
    assert oauth is not None
    with pytest.raises(SettingsError, match="no key of DEBATEBOT_TOKEN_ENCRYPTION_KEY is the key"):
        build_installs(settings, oauth, bot.engine)


async def test_the_emulator_refuses_a_token_where_slack_would() -> None:
    """The stand-in fails the way Slack does: a workspace's token on another workspace's
    channel, and a token unknown, revoked or expired."""
    emulator = SlackEmulator()
    await emulator.start()
    emulator.tenancy = Workspaces(rotation=True)
    emulator.tenancy.add("T1", channels={CHANNEL}, token=BOT_TOKEN)
    emulator.tenancy.add("T2", channels={OTHER}, token="xoxb-t2-token")
    try:

        async def post(token: str, channel: str) -> str:
            client = AsyncWebClient(token=token, base_url=emulator.api_url)
            try:
                await client.chat_postMessage(channel=channel, text="hello")
            except SlackApiError as error:
                return str(error.response["error"])
            return "ok"

        assert await post(BOT_TOKEN, CHANNEL) == "ok"
        assert await post("xoxb-t2-token", OTHER) == "ok"
        assert await post(BOT_TOKEN, OTHER) == "channel_not_found"
        assert await post("xoxb-t2-token", CHANNEL) == "channel_not_found"
        assert await post("xoxb-nobody", CHANNEL) == "invalid_auth"
        emulator.tenancy.expire("xoxb-t2-token")
        assert await post("xoxb-t2-token", OTHER) == "token_expired"
        emulator.tenancy.uninstall("T1")
        assert await post(BOT_TOKEN, CHANNEL) == "token_revoked"
        assert [m["text"] for m in emulator.posted(OTHER)] == ["hello"]
    finally:
        await emulator.stop()
