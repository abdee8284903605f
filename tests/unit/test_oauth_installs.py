"""OAuth installs without I/O: the settings that turn them on (placeholders and Socket Mode
refused), the tokens' encryption (a round trip; a tampered, moved or foreign ciphertext
refused), how an install is keyed and looked up (an org-wide install by its enterprise), the
renewal of a rotating token, and what Bolt's authorization of a request gets."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import pytest
from pydantic import SecretStr
from slack_bolt.async_app import AsyncBoltContext
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.oauth.installation_store import Bot
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.settings import Settings, SettingsError
from bot.slack.errors import TokenNotRenewedError
from bot.slack.installs import (
    SLACK_AUTHORIZE_URL,
    UNRENEWED,
    StoredAuthorize,
    authorize_url,
    unrenewed_answer,
)
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.rotation import BotTokens
from bot.store.cipher import TokenCipher
from bot.store.errors import TokenDecryptError
from bot.store.installations import key, lookup_key

KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978"
OAUTH: dict[str, Any] = {
    "slack_client_id": "1234567890.9876543210",
    "slack_client_secret": SecretStr("3b4c5d6e7f8091a2b3c4d5e6f708192a"),
    "slack_signing_secret": SecretStr("8f742231b10e8888abcd99yyyzzz85a5"),
    "token_encryption_key": SecretStr(KEY),
}


# --- settings --------------------------------------------------------------------------------


def test_one_workspace_is_the_default() -> None:
    assert Settings().slack_oauth() is None
    assert Settings(token_encryption_key=SecretStr(KEY)).slack_oauth() is None


def test_oauth_settings_are_checked_and_kept_out_of_reprs() -> None:
    oauth = Settings(**OAUTH).slack_oauth()
    assert oauth is not None
    assert oauth.client_id == "1234567890.9876543210"
    assert oauth.encryption_keys == (KEY.encode(),)
    assert oauth.redirect_uri is None
    assert KEY not in repr(oauth)
    assert "3b4c5d6e" not in repr(oauth)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"slack_client_secret": None}, "DEBATEBOT_SLACK_CLIENT_SECRET is not set"),
        ({"slack_client_id": None}, "DEBATEBOT_SLACK_CLIENT_ID is not set"),
        ({"slack_client_id": "your-client-id"}, "DEBATEBOT_SLACK_CLIENT_ID holds a placeholder"),
        ({"slack_client_id": "A1B2C3D4E5"}, "DEBATEBOT_SLACK_CLIENT_ID is not a Slack client id"),
        (
            {"slack_client_secret": SecretStr("changeme")},
            "DEBATEBOT_SLACK_CLIENT_SECRET holds a placeholder",
        ),
        ({"slack_signing_secret": None}, "DEBATEBOT_SLACK_SIGNING_SECRET is not set"),
        ({"token_encryption_key": None}, "DEBATEBOT_TOKEN_ENCRYPTION_KEY is not set"),
        (
            {"token_encryption_key": SecretStr("<your encryption key, 32 characters long>")},
            "DEBATEBOT_TOKEN_ENCRYPTION_KEY holds a placeholder",
        ),
        (
            {"token_encryption_key": SecretStr("0123456789abcdef")},
            "DEBATEBOT_TOKEN_ENCRYPTION_KEY is shorter than 32 characters",
        ),
        ({"audit_key": SecretStr(KEY)}, "is the same as DEBATEBOT_AUDIT_KEY"),
        (
            {"slack_redirect_uri": "https://debatebot.example.com/slack/events"},
            "DEBATEBOT_SLACK_REDIRECT_URI must be the bot's public address",
        ),
        (
            {"slack_app_token": SecretStr("xapp-1-A1-123-abcdef")},
            "installs need HTTP",
        ),
    ],
)
def test_a_missing_placeholder_or_conflicting_setting_is_named(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings(**{**OAUTH, **change}).slack_oauth()


def test_the_authorize_page_is_slacks_unless_the_web_api_is_elsewhere() -> None:
    assert authorize_url("https://slack.com/api/") == SLACK_AUTHORIZE_URL
    assert authorize_url("http://127.0.0.1:8123/api/") == "http://127.0.0.1:8123/oauth/v2/authorize"


# --- encryption ------------------------------------------------------------------------------


def test_a_sealed_token_opens_where_it_was_sealed_and_nowhere_else() -> None:
    cipher = TokenCipher(KEY.encode())
    sealed = cipher.seal("xoxb-1-secret", where="slack_bot:-:T1:bot_token")
    assert sealed.startswith("v1.")
    assert "xoxb" not in sealed
    assert sealed != cipher.seal("xoxb-1-secret", where="slack_bot:-:T1:bot_token"), "nonce"
    assert cipher.open(sealed, where="slack_bot:-:T1:bot_token") == "xoxb-1-secret"
    # Copied into another workspace's row, or into the refresh token's column: refused.
    with pytest.raises(TokenDecryptError, match="does not decrypt"):
        cipher.open(sealed, where="slack_bot:-:T2:bot_token")
    with pytest.raises(TokenDecryptError, match="does not decrypt"):
        cipher.open(sealed, where="slack_bot:-:T1:refresh_token")


def test_a_tampered_or_foreign_ciphertext_is_refused_naming_the_key() -> None:
    cipher = TokenCipher(KEY.encode())
    where = "slack_bot:-:T1:bot_token"
    sealed = cipher.seal("xoxb-1-secret", where=where)
    raw = bytearray(base64.urlsafe_b64decode(sealed.removeprefix("v1.")))
    raw[20] ^= 0x01  # one bit of the ciphertext
    flipped = "v1." + base64.urlsafe_b64encode(bytes(raw)).decode()
    for bad in (flipped, sealed[:20], "v1.not-base64!!", "v1."):
        with pytest.raises(TokenDecryptError, match="DEBATEBOT_TOKEN_ENCRYPTION_KEY"):
            cipher.open(bad, where=where)
    with pytest.raises(TokenDecryptError, match="not sealed the way"):
        cipher.open("xoxb-1-secret", where=where)
    other = TokenCipher(b"another key entirely, 32 characters or more")
    with pytest.raises(TokenDecryptError, match="no key of DEBATEBOT_TOKEN_ENCRYPTION_KEY is"):
        other.open(sealed, where=where)


OLD_KEY, NEW_KEY = "o" * 40, "n" * 40


@pytest.mark.parametrize(
    "value",
    [f"{NEW_KEY},{OLD_KEY}", f" {NEW_KEY} , {OLD_KEY} ", json.dumps([NEW_KEY, OLD_KEY])],
    ids=["comma-separated", "spaced", "JSON list"],
)
def test_the_token_key_setting_takes_several_keys_the_first_encrypting(value: str) -> None:
    oauth = Settings(**{**OAUTH, "token_encryption_key": SecretStr(value)}).slack_oauth()
    assert oauth is not None
    assert oauth.encryption_keys == (NEW_KEY.encode(), OLD_KEY.encode())


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (f"{NEW_KEY},{'s' * 20}", r"\(key 2 of 2\) is shorter than 32"),
        (f"{NEW_KEY},{NEW_KEY}", "lists one key twice"),
        ('["unclosed', "not a JSON list of strings"),
        (f"{NEW_KEY},{'x' * 40}", "holds a placeholder"),
    ],
)
def test_each_token_key_is_checked_by_its_place(value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings(**{**OAUTH, "token_encryption_key": SecretStr(value)}).slack_oauth()


def test_tokens_sealed_with_an_older_key_open_and_new_ones_use_the_first() -> None:
    where = "slack_bot:-:T1:bot_token"
    old = TokenCipher(OLD_KEY.encode())
    rotating = TokenCipher(NEW_KEY.encode(), OLD_KEY.encode())
    sealed_before = old.seal("xoxb-1-secret", where=where)
    assert rotating.opened(sealed_before, where=where) == ("xoxb-1-secret", 1)
    sealed_now = rotating.seal("xoxb-1-secret", where=where)
    assert rotating.opened(sealed_now, where=where) == ("xoxb-1-secret", 0)
    assert TokenCipher(NEW_KEY.encode()).open(sealed_now, where=where) == "xoxb-1-secret"
    with pytest.raises(TokenDecryptError):
        old.open(sealed_now, where=where)


# --- keys ------------------------------------------------------------------------------------


def test_an_install_is_keyed_by_its_enterprise_and_team() -> None:
    assert key(enterprise_id=None, team_id="T1") == "-:T1"
    assert key(enterprise_id="E1", team_id="T1") == "E1:T1"
    assert key(enterprise_id="E1", team_id=None) == "E1:-"


def test_an_org_wide_install_is_looked_up_by_its_enterprise_alone() -> None:
    """slack_sdk's rule: `is_enterprise_install`, or no team, means the org's install."""
    assert lookup_key(enterprise_id="E1", team_id="T5", is_enterprise_install=True) == "E1:-"
    assert lookup_key(enterprise_id="E1", team_id=None, is_enterprise_install=False) == "E1:-"
    assert lookup_key(enterprise_id="E1", team_id="T5", is_enterprise_install=False) == "E1:T5"
    assert lookup_key(enterprise_id=None, team_id="T1", is_enterprise_install=None) == "-:T1"


# --- renewal ---------------------------------------------------------------------------------


class Bots(AsyncInstallationStore):
    """The bots of installs, in memory."""

    def __init__(self, *bots: Bot) -> None:
        self.bots = {(b.enterprise_id, b.team_id): b for b in bots}
        self.saved: list[Bot] = []

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        return self.bots.get((enterprise_id, None if is_enterprise_install else team_id))

    async def async_save_bot(self, bot: Bot) -> None:
        self.saved.append(bot)
        self.bots[(bot.enterprise_id, bot.team_id)] = bot


class SlackAnswers(AsyncWebClient):
    """`oauth.v2.access` answering from a script: an answer, or an error code."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        super().__init__()
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []

    async def oauth_v2_access(self, **kwargs: Any) -> AsyncSlackResponse:
        self.asked.append(kwargs)
        answer = self.answers.pop(0)
        data = {"ok": False, "error": answer} if isinstance(answer, str) else answer
        response = AsyncSlackResponse(
            client=self,
            http_verb="POST",
            api_url="oauth.v2.access",
            req_args={},
            data=data,
            headers={},
            status_code=500 if data.get("error") == "internal_error" else 200,
        )
        if not data.get("ok"):
            raise SlackApiError("refused", response)
        return response


def rotating(token: str = "xoxe.xoxb-old", *, in_s: float = 60.0) -> Bot:
    return Bot(
        team_id="T2",
        bot_token=token,
        bot_id="BB2",
        bot_user_id="UB2",
        bot_refresh_token="xoxe-1-old",
        bot_token_expires_at=int(time.time() + in_s),
        installed_at=time.time(),
    )


def renewed(n: int) -> dict[str, Any]:
    return {
        "ok": True,
        "token_type": "bot",
        "access_token": f"xoxe.xoxb-{n}",
        "refresh_token": f"xoxe-1-{n}",
        "expires_in": 43_200,
    }


def tokens(store: Bots, client: SlackAnswers) -> BotTokens:
    rotator = AsyncTokenRotator(client_id="1.2", client_secret="s", client=client)
    return BotTokens(store=store, rotator=rotator)


async def bot_of(renewing: BotTokens) -> Bot | None:
    return await renewing.bot(enterprise_id=None, team_id="T2", is_enterprise_install=False)


async def test_a_token_far_from_expiry_is_used_as_it_is() -> None:
    store, client = Bots(rotating(in_s=5 * 3600)), SlackAnswers()
    bot = await bot_of(tokens(store, client))
    assert bot is not None
    assert bot.bot_token == "xoxe.xoxb-old"
    assert client.asked == []


async def test_a_token_due_is_renewed_once_and_the_new_pair_saved_before_use() -> None:
    store, client = Bots(rotating()), SlackAnswers(renewed(1))
    renewing = tokens(store, client)
    bots = await asyncio.gather(*(bot_of(renewing) for _ in range(5)))
    assert {b.bot_token for b in bots if b is not None} == {"xoxe.xoxb-1"}
    assert len(client.asked) == 1, "one renewal, however many requests wait for it"
    assert client.asked[0]["grant_type"] == "refresh_token"
    assert client.asked[0]["refresh_token"] == "xoxe-1-old"
    [saved] = store.saved
    assert (saved.bot_token, saved.bot_refresh_token) == ("xoxe.xoxb-1", "xoxe-1-1")
    assert saved.bot_token_expires_at is not None
    assert saved.bot_token_expires_at > time.time() + 11 * 3600


async def test_a_refused_renewal_refuses_the_token_as_slack_refuses_an_expired_one() -> None:
    store = Bots(rotating(in_s=-10))
    with pytest.raises(TokenRefusedError, match="invalid_refresh_token") as refused:
        await bot_of(tokens(store, SlackAnswers("invalid_refresh_token")))
    assert refused.value.code == "token_expired"
    assert store.saved == []


async def test_a_renewal_another_replica_made_first_is_used() -> None:
    store = Bots(rotating(in_s=-10))
    client = SlackAnswers("invalid_refresh_token")
    renewing = tokens(store, client)
    original = store.async_find_bot

    async def elsewhere(**kwargs: Any) -> Bot | None:
        # The other replica saves its renewal while this one asks Slack.
        if client.asked:
            fresh = rotating("xoxe.xoxb-theirs", in_s=43_200)
            fresh.bot_refresh_token = "xoxe-1-theirs"
            return fresh
        return await original(**kwargs)

    store.async_find_bot = elsewhere  # type: ignore[method-assign]
    bot = await bot_of(renewing)
    assert bot is not None
    assert bot.bot_token == "xoxe.xoxb-theirs"


async def test_slack_failing_to_renew_keeps_a_token_that_has_not_expired() -> None:
    store = Bots(rotating(in_s=600))
    bot = await bot_of(tokens(store, SlackAnswers("internal_error")))
    assert bot is not None
    assert bot.bot_token == "xoxe.xoxb-old"
    # Expired, and Slack did not renew it: a call Slack did not answer (retried), no refusal.
    expired = Bots(rotating(in_s=-10))
    with pytest.raises(SlackClientError, match="could not be asked"):
        await bot_of(tokens(expired, SlackAnswers("internal_error")))


# --- authorization ---------------------------------------------------------------------------


async def test_a_request_is_authorized_with_its_workspaces_stored_bot() -> None:
    store = Bots(rotating(in_s=5 * 3600))
    authorize = StoredAuthorize(tokens(store, SlackAnswers()))
    context = AsyncBoltContext({"is_enterprise_install": False})
    result = await authorize(context=context, enterprise_id=None, team_id="T2", user_id="UBOB")
    assert result is not None
    assert (result.bot_token, result.bot_user_id, result.bot_id) == (
        "xoxe.xoxb-old",
        "UB2",
        "BB2",
    )
    assert (result.team_id, result.user_id) == ("T2", "UBOB")
    nowhere = await authorize(context=context, enterprise_id=None, team_id="T9", user_id="U")
    assert nowhere is None


async def test_a_request_whose_expired_token_cannot_be_renewed_is_not_authorized() -> None:
    # Refused for good: None, which Bolt answers NOT_INSTALLED.
    authorize = StoredAuthorize(
        tokens(Bots(rotating(in_s=-10)), SlackAnswers("invalid_refresh_token"))
    )
    context = AsyncBoltContext({"is_enterprise_install": False})
    result = await authorize(context=context, enterprise_id=None, team_id="T2", user_id="U")
    assert result is None

    # Slack could not do it now: an outage, raised past Bolt's authorization (not a
    # SlackApiError, which it would answer NOT_INSTALLED) to the app's error handler.
    authorize = StoredAuthorize(tokens(Bots(rotating(in_s=-10)), SlackAnswers("internal_error")))
    with pytest.raises(TokenNotRenewedError) as raised:
        await authorize(context=context, enterprise_id=None, team_id="T2", user_id="U")
    assert not isinstance(raised.value, SlackApiError)


async def test_a_request_turned_away_by_an_outage_is_told_so_where_slack_shows_it() -> None:
    context = AsyncBoltContext({})
    event = {"type": "event_callback", "event": {"type": "app_home_opened"}}
    assert await unrenewed_answer(event, context) is None, "Bolt's 500: Slack sends it again"
    form = {"type": "view_submission", "view": {"callback_id": "debate"}}
    answer = await unrenewed_answer(form, context)
    assert answer is not None
    assert (answer.status, answer.body) == (200, UNRENEWED)
