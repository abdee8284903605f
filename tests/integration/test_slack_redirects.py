"""No call on the process's Slack session follows a redirect (bot.outbound.refuse_redirects):
the bot's Web API client and the plain one Bolt builds for each request, the OAuth code exchange
and token renewal, `response_url` answers and file uploads, each against the Slack emulator
answering 302 or 307 to another path of its own origin or to another origin. Whatever the
redirect points at receives nothing: no token, no client secret, no code or refresh token, no
file; the call is made once and fails with the address it pointed at. Once the session is
closed, no call is made at all (slack_sdk would open a session of its own, which follows): not by
the bot's client, nor by the client and `say` Bolt hands a listener (made the bot's kind by the
listeners' middleware), nor through `response_url`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from pydantic import SecretStr
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncSay
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound import Failure, OutboundError
from bot.settings import Settings
from bot.slack.middleware import bot_client
from bot.slack.replies import PooledRespond
from bot.wiring import slack_client, slack_session
from tests.e2e.host_emulators import OtherHost
from tests.e2e.slack_emulator import Fault, SlackEmulator

TOKEN = "xoxb-1234-5678-emulatedtoken"
SECRET = "3b4c5d6e7f8091a2b3c4d5e6f708192a"
REDIRECTS = [(302, "same origin"), (307, "same origin"), (302, "other"), (307, "other")]


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    emulator = SlackEmulator()
    await emulator.start()
    yield emulator
    await emulator.stop()


@pytest.fixture
async def other() -> AsyncIterator[OtherHost]:
    host = OtherHost()
    await host.start()
    yield host
    await host.stop()


@pytest.fixture
def settings(slack: SlackEmulator) -> Settings:
    return Settings(slack_bot_token=SecretStr(TOKEN), slack_api_url=slack.api_url)


@pytest.fixture
async def http(settings: Settings) -> AsyncIterator[aiohttp.ClientSession]:
    session = slack_session(settings)
    yield session
    await session.close()


def pointing(where: str, slack: SlackEmulator, other: OtherHost, path: str) -> str:
    return f"{slack.moved_url}{path}" if where == "same origin" else f"{other.url}/{path}"


def nothing_arrived(slack: SlackEmulator, other: OtherHost) -> None:
    assert slack.moved == [], "nothing reached the other path of Slack's origin"
    assert other.requests == [], "nothing reached the other origin"
    assert other.bodies == []


def refused_toward(raised: pytest.ExceptionInfo[OutboundError], status: int, target: str) -> None:
    error = raised.value
    assert error.failure is Failure.REDIRECT
    assert error.target == target.removeprefix("http://").split("/", 1)[0]
    assert f"was answered HTTP {status}, a redirect to {target}, which was not followed" in str(
        error
    )


@pytest.mark.parametrize(("status", "where"), REDIRECTS)
@pytest.mark.parametrize("made_by", ["bot", "bolt"])
async def test_a_web_api_call_is_refused_not_followed_and_made_once(
    slack: SlackEmulator,
    other: OtherHost,
    settings: Settings,
    http: aiohttp.ClientSession,
    status: int,
    where: str,
    made_by: str,
) -> None:
    client = (
        slack_client(settings, session=http)
        if made_by == "bot"
        # What Bolt builds for each request (the listeners' middleware hands listeners the bot's
        # kind instead): slack_sdk's own client on the app client's session.
        else AsyncWebClient(token=TOKEN, base_url=slack.api_url, session=http)
    )
    target = pointing(where, slack, other, "api/chat.postMessage")
    slack.fail("chat.postMessage", Fault(status=status, redirect=target))

    with pytest.raises(OutboundError) as raised:
        await client.chat_postMessage(channel="C1", text="the verdict")

    refused_toward(raised, status, target)
    nothing_arrived(slack, other)
    [call] = slack.calls_of("chat.postMessage", ok_only=False)
    assert (call.status, call.token) == (status, TOKEN)
    assert slack.posted("C1") == []
    await client.chat_postMessage(channel="C1", text="the verdict")
    assert [m["text"] for m in slack.posted("C1")] == ["the verdict"]


@pytest.mark.parametrize(("status", "where"), REDIRECTS)
@pytest.mark.parametrize("grant", ["code", "refresh_token"])
async def test_the_oauth_exchange_sends_its_secret_code_and_refresh_token_nowhere_else(
    slack: SlackEmulator,
    other: OtherHost,
    http: aiohttp.ClientSession,
    status: int,
    where: str,
    grant: str,
) -> None:
    # As the install flow and the token rotator call it: no token, the client id and secret as
    # Basic auth, the code or the refresh token in the form body.
    client = AsyncWebClient(base_url=slack.api_url, session=http)
    target = pointing(where, slack, other, "api/oauth.v2.access")
    slack.fail("oauth.v2.access", Fault(status=status, redirect=target))
    exchange = (
        {"code": "4821.c0de"}
        if grant == "code"
        else {"grant_type": "refresh_token", "refresh_token": "xoxe-1-r3fresh"}
    )

    with pytest.raises(OutboundError) as raised:
        await client.oauth_v2_access(client_id="1234.5678", client_secret=SECRET, **exchange)

    refused_toward(raised, status, target)
    nothing_arrived(slack, other)
    [call] = slack.calls_of("oauth.v2.access", ok_only=False)
    assert call.token.startswith("Basic "), "the secret went to Slack's address only"
    assert all(call.params[name] == value for name, value in exchange.items())


@pytest.mark.parametrize(("status", "where"), REDIRECTS)
async def test_a_response_url_answer_is_refused_not_followed(
    slack: SlackEmulator,
    other: OtherHost,
    http: aiohttp.ClientSession,
    status: int,
    where: str,
) -> None:
    respond = PooledRespond(response_url=f"{slack.url}/response/k1", session=http)
    target = pointing(where, slack, other, "response/k2")
    slack.fail("response_url", Fault(status=status, redirect=target))

    with pytest.raises(OutboundError) as raised:
        await respond(text="Queued as debate #1", response_type="ephemeral")

    refused_toward(raised, status, target)
    nothing_arrived(slack, other)
    assert slack.responses == []
    await respond(text="Queued as debate #1", response_type="ephemeral")
    assert [r["text"] for r in slack.responses] == ["Queued as debate #1"]


async def test_an_upload_goes_tokenless_to_the_address_slack_gave_and_never_along_a_redirect(
    slack: SlackEmulator, other: OtherHost, settings: Settings, http: aiohttp.ClientSession
) -> None:
    client = slack_client(settings, session=http)

    await client.files_upload_v2(channel="C1", content="# ADR 42", filename="0042.md")

    [(file_id, arrived)] = slack.uploads.items()
    assert arrived.path == f"/upload/v1/{file_id}", "the address files.getUploadURLExternal gave"
    assert (arrived.body, arrived.authorization) == (b"# ADR 42", ""), "the bytes, no token"
    assert {c.token for c in slack.calls} == {TOKEN}, "the token went with the Web API calls"

    slack.fail("files.upload", Fault(status=307, redirect=f"{other.url}/upload"))
    with pytest.raises(OutboundError) as raised:
        await client.files_upload_v2(channel="C1", content="# ADR 43", filename="0043.md")

    refused_toward(raised, 307, f"{other.url}/upload")
    nothing_arrived(slack, other)
    assert len(slack.uploads) == 1
    assert len(slack.calls_of("files.completeUploadExternal")) == 1, "the second never shared"


async def handed_to_a_listener(settings: Settings, http: aiohttp.ClientSession) -> dict[str, Any]:
    """The `client` and `say` Bolt hands a command's listener, on an app whose client is the
    bot's, behind the listeners' middleware (`bot_client`)."""

    async def authorize(**_: Any) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=None, team_id="T1", bot_token=TOKEN)

    app = AsyncApp(
        client=slack_client(settings, session=http),
        authorize=authorize,
        signing_secret=SECRET,
        request_verification_enabled=False,
        process_before_response=True,
    )
    handed: dict[str, Any] = {}

    async def middleware(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        bot_client(context, app.client)
        await next()

    async def listener(ack: AsyncAck, client: AsyncWebClient, say: AsyncSay) -> None:
        await ack()
        handed.update(client=client, say=say)

    app.middleware(middleware)
    app.command("/debate")(listener)
    command = {"command": "/debate", "text": "Should we?", "team_id": "T1", "channel_id": "C1"}
    answer = await app.async_dispatch(
        AsyncBoltRequest(
            body=urlencode(command),
            headers={"content-type": ["application/x-www-form-urlencoded"]},
        )
    )
    assert answer.status == 200
    assert handed["client"].token == TOKEN, "the request's token, set by Bolt's authorization"
    return handed


async def test_once_the_session_is_closed_no_call_is_made(
    slack: SlackEmulator, settings: Settings, http: aiohttp.ClientSession
) -> None:
    client = slack_client(settings, session=http)
    respond = PooledRespond(response_url=f"{slack.url}/response/k1", session=http)
    listener = await handed_to_a_listener(settings, http)
    await http.close()

    with pytest.raises(SlackRequestError, match="the pooled Slack session is closed"):
        await client.chat_postMessage(channel="C1", text="the verdict")
    with pytest.raises(SlackRequestError, match="the pooled Slack session is closed"):
        await respond(text="Queued as debate #1")
    with pytest.raises(SlackRequestError, match="the pooled Slack session is closed"):
        await listener["client"].chat_postMessage(channel="C1", text="the verdict")
    with pytest.raises(SlackRequestError, match="the pooled Slack session is closed"):
        await listener["say"]("the verdict")

    assert slack.calls == []
    assert slack.responses == []
