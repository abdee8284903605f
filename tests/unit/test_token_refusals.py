"""A workspace whose bot token Slack refuses (OAuth installs): how long its probes wait, which
workspace a probe acts for, which of Slack's answers refuse a token, when a probe takes a token
that lacked a scope, and what people and the operator are told. The store's side (marks, claims,
due lanes) is in tests/integration/test_token_refusals.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import token_refusal
from bot.slackweb.token import workspace_refusal, workspace_token_fix
from bot.store.installations import key, lookup_key
from bot.store.refusals import Backoff, BotState, Refusal

REFUSAL = Refusal(code="invalid_auth", scope=None, since=datetime.now(UTC), probe_at=None)


def test_probes_wait_twice_as_long_each_time_up_to_the_cap() -> None:
    backoff = Backoff(first_s=2.0, max_s=15.0)
    waits = [backoff.after(None)]
    for _ in range(5):
        waits.append(backoff.after(waits[-1]))
    assert waits == [2.0, 4.0, 8.0, 15.0, 15.0, 15.0]


def test_a_wait_stored_by_an_older_setting_is_kept_within_the_new_bounds() -> None:
    """Replicas share the stored wait: one with other settings doubles it within its own."""
    backoff = Backoff(first_s=2.0, max_s=15.0)
    assert backoff.after(0.0) == 4.0
    assert backoff.after(300.0) == 15.0
    assert Backoff(first_s=30.0, max_s=15.0).after(None) == 15.0


@pytest.mark.parametrize(
    ("enterprise", "team"),
    [(None, "T1"), ("E1", "T5"), ("E1", None)],
    ids=["workspace", "workspace of an org", "org-wide"],
)
def test_a_probe_acts_for_a_workspace_that_finds_exactly_its_bot(
    enterprise: str | None, team: str | None
) -> None:
    """A probe's call carries the token of the bot the workspace it acts for looks up; an
    org-wide install has no team, and its own key finds it."""
    bot = BotState(
        installation=key(enterprise_id=enterprise, team_id=team),
        enterprise_id=enterprise,
        team_id=team,
        enterprise_name=None,
        team_name=None,
        refusal=REFUSAL,
    )
    acting = bot.acting_as
    assert acting.enterprise_id == enterprise
    found = lookup_key(
        enterprise_id=acting.enterprise_id, team_id=acting.team_id, is_enterprise_install=None
    )
    assert found == bot.installation


def refused(code: str, **more: Any) -> SlackApiError:
    response = AsyncSlackResponse(
        client=AsyncWebClient(),
        http_verb="POST",
        api_url="chat.postMessage",
        req_args={},
        data={"ok": False, "error": code, **more},
        headers={},
        status_code=200,
    )
    return SlackApiError("refused", response)


@pytest.mark.parametrize(
    "code",
    [
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_authed",
        "team_access_not_granted",
    ],
)
def test_slacks_answers_that_refuse_the_token_itself(code: str) -> None:
    error = token_refusal(refused(code), "chat.postMessage")
    assert error is not None
    assert error.code == code


def test_a_message_refused_for_itself_is_no_token_refusal() -> None:
    assert token_refusal(refused("channel_not_found"), "chat.postMessage") is None
    missing = token_refusal(refused("missing_scope", needed="im:write"), "conversations.open")
    assert missing is not None
    assert missing.needed == "im:write"


def test_a_person_is_told_nothing_was_queued_and_what_an_admin_does() -> None:
    told = workspace_refusal("account_inactive")
    assert "(account_inactive)" in told
    assert "nothing was queued" in told
    assert "/slack/install" in told
    assert "DEBATEBOT_SLACK_BOT_TOKEN" not in told, "no setting of the deployment's"


def test_the_fix_follows_the_code() -> None:
    assert "grant the app access" in workspace_token_fix("team_access_not_granted")
    assert "`chat:write` scope" in workspace_token_fix("missing_scope", "chat:write")
    assert "install the app in this workspace again" in workspace_token_fix("token_revoked")


class AuthTest(AsyncWebClient):
    """Slack answering `auth.test` (it needs no scope) with the given headers."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(token="xoxb-unused")
        self.answer_headers = headers

    async def auth_test(self, **kwargs: Any) -> AsyncSlackResponse:
        return AsyncSlackResponse(
            client=self,
            http_verb="POST",
            api_url="auth.test",
            req_args={},
            data={"ok": True, "user_id": "UBOT", "user": "debatebot", "team_id": "T1"},
            headers=self.answer_headers,
            status_code=200,
        )


@pytest.mark.parametrize(
    ("headers", "scope", "taken"),
    [
        ({"x-oauth-scopes": "commands,chat:write"}, "chat:write", True),
        ({"x-oauth-scopes": "commands,users:read"}, "chat:write", False),
        ({"X-OAuth-Scopes": "commands, chat:write"}, "chat:write", True),
        ({"x-oauth-scopes": "groups:history"}, "channels:history,groups:history", True),
        ({}, "chat:write", True),
        ({"x-oauth-scopes": "commands"}, None, True),
    ],
    ids=["granted", "lacking", "any case", "one of several", "no header", "no scope asked"],
)
async def test_a_missing_scope_is_taken_only_once_auth_test_names_it_granted(
    headers: dict[str, str], scope: str | None, taken: bool
) -> None:
    """`auth.test` answers a token that lacks a scope, so for a `missing_scope` the probe looks
    at the scopes Slack names in its `x-oauth-scopes` header; with no header, its word goes."""
    refused = await SlackDirectory(AuthTest(headers)).check_token(scope=scope)
    if taken:
        assert refused is None
    else:
        assert refused is not None
        assert (refused.code, refused.needed) == ("missing_scope", scope)
