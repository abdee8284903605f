"""How a process reaches Slack, built from the settings: its one pooled HTTP session, and either
the Web API client with the bot token (one workspace) or OAuth installs (many: the install flow,
the stored installs, and a client whose every call carries its own workspace's token).

slack_sdk and Bolt are imported by the functions that use them, so a command that needs neither
starts without paying for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from bot.metrics import Metrics
from bot.secrets import SlackOAuth
from bot.settings import Settings, SettingsError
from bot.slackweb.token import TokenGate
from bot.store.tenancy import EVERY_WORKSPACE

if TYPE_CHECKING:
    import aiohttp
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slackweb.installations import DatabaseInstallationStore

OnFailure = Callable[[str, Exception], None]


@dataclass
class Installs:
    """OAuth installs (bot.slack.installs): their store, and what the Bolt app takes to serve
    them (its client, install flow and authorization)."""

    store: DatabaseInstallationStore
    app_options: dict[str, Any]
    delivery_client: AsyncWebClient
    """The client the delivery loop and jobs call with: each call carries the token of the
    workspace it is made for (bot.slackweb.acting)."""


@dataclass
class SlackAccess:
    """A process's way to Slack, on its one pooled session (`http`, which its owner closes)."""

    http: aiohttp.ClientSession
    client: AsyncWebClient
    """What the delivery loop, the jobs and the bot's own calls use: the bot token's client,
    or with installs `Installs.delivery_client`."""
    gate: TokenGate | None
    """One workspace: the process's view of its bot token, whose refusal pauses everything.
    None with installs: each call is made with its own workspace's token, and a refusal holds
    only that workspace (bot.store.refusals)."""
    installs: Installs | None


def slack_access(settings: Settings, engine: Engine, metrics: Metrics) -> SlackAccess | None:
    """With DEBATEBOT_SLACK_CLIENT_ID and _SECRET, OAuth installs; else with a bot token, the
    one workspace's client; else None (a worker that delivers nothing). Made inside the running
    loop. Raises SettingsError when a secret is a placeholder or the encryption key does not
    open the stored tokens."""
    oauth = settings.slack_oauth()
    if oauth is not None:
        http = slack_session(settings)
        installs = build_installs(settings, oauth, engine, metrics, http=http)
        return SlackAccess(http=http, client=installs.delivery_client, gate=None, installs=installs)
    if not settings.slack_bot_token:
        return None
    gate = TokenGate()
    http = slack_session(settings)
    client = slack_client(settings, metrics, gate, session=http)
    return SlackAccess(http=http, client=client, gate=gate, installs=None)


def slack_session(settings: Settings) -> aiohttp.ClientSession:
    """The process's one HTTP session to Slack, shared by the Web API client (the bot's calls,
    Bolt's, the OAuth code exchange and token rotation), the `response_url` answers and the file
    downloads: at most DEBATEBOT_SLACK_CONNECTIONS connections, kept alive between calls, each
    call bounded by DEBATEBOT_SLACK_TIMEOUT_S, no redirect followed (a 3xx is an OutboundError
    naming where it pointed). Made inside the running loop; its owner closes it.

    slack_sdk's clients use a session they are given and never close it ("use_running_session"
    in `_request_with_session`); without one they open and close a session, so a connection
    and a TLS handshake, per call. They apply their own `timeout` only to sessions they make,
    so the session carries the deadline."""
    from bot.outbound import pooled_session

    return pooled_session(
        connections=settings.slack_connections, timeout_s=settings.slack_timeout_s
    )


def slack_client(
    settings: Settings,
    metrics: Metrics | None = None,
    gate: TokenGate | None = None,
    *,
    session: aiohttp.ClientSession,
) -> AsyncWebClient:
    """The Web API client on `session` (`slack_session`, which follows no redirect; the client
    makes no call once it is closed); with `metrics`, every failed call is counted by method
    and code, and with `gate`, any call Slack answers by refusing the bot token (Bolt's own too)
    tells it."""
    from bot.slackweb.poster import MeteredWebClient

    return MeteredWebClient(
        on_error=counting(metrics, gate),
        token=settings.slack_bot_token_value(),
        **web_options(settings, session),
    )


def build_installs(
    settings: Settings,
    oauth: SlackOAuth,
    engine: Engine,
    metrics: Metrics | None = None,
    *,
    http: aiohttp.ClientSession | None = None,
) -> Installs:
    """The install flow, the stores on `engine` and the per-workspace authorization, on the
    process's pooled Slack session (`http`). Raises SettingsError when
    DEBATEBOT_TOKEN_ENCRYPTION_KEY does not open the tokens already stored."""
    from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator

    from bot.slack.installs import NOT_INSTALLED, StoredAuthorize, authorize_url, oauth_flow
    from bot.slackweb.acting import WorkspaceClient
    from bot.slackweb.installations import DatabaseInstallationStore, DatabaseStateStore
    from bot.slackweb.poster import MeteredWebClient
    from bot.slackweb.rotation import BotTokens
    from bot.store.cipher import TokenCipher
    from bot.store.db import session_scope
    from bot.store.errors import TokenDecryptError
    from bot.store.installations import check_key

    cipher = TokenCipher(*oauth.encryption_keys)
    try:
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            check_key(session, cipher=cipher)
    except TokenDecryptError as error:
        raise SettingsError(str(error)) from error

    failed = counting(metrics)
    # No token: each request gets its workspace's (Bolt copies this client's address, timeout
    # and session into the client it hands listeners), and the flow's calls carry the client id
    # and secret.
    client = MeteredWebClient(on_error=failed, **web_options(settings, http))
    store = DatabaseInstallationStore(engine=engine, cipher=cipher)
    tokens = BotTokens(
        store=store,
        rotator=AsyncTokenRotator(
            client_id=oauth.client_id, client_secret=oauth.client_secret, client=client
        ),
    )
    flow = oauth_flow(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        redirect_uri=oauth.redirect_uri,
        authorization_url=authorize_url(settings.slack_api_url),
        client=client,
        store=store,
        states=DatabaseStateStore(engine=engine),
        engine=engine,
    )
    return Installs(
        store=store,
        delivery_client=WorkspaceClient(
            tokens=tokens, on_error=failed, **web_options(settings, http)
        ),
        app_options={
            "client": client,
            "oauth_flow": flow,
            "authorize": StoredAuthorize(tokens),
            "user_facing_authorize_error_message": NOT_INSTALLED,
        },
    )


def web_options(settings: Settings, session: aiohttp.ClientSession | None) -> dict[str, Any]:
    """What every Web API client of the process is made with: Slack's address, the call
    deadline, and the pooled session."""
    return {
        "base_url": settings.slack_api_url,
        "timeout": int(max(1, settings.slack_timeout_s)),
        "session": session,
    }


def counting(metrics: Metrics | None, gate: TokenGate | None = None) -> OnFailure:
    """What a client does with each call that fails: counts it by method and code in
    `metrics`, and tells `gate` when Slack refused the bot token."""
    from bot.slackweb.poster import classify, token_refusal

    def failed(method: str, raised: Exception) -> None:
        if metrics is not None:
            metrics.slack_errors.labels(method, classify(raised, method, "-").code).inc()
        if gate is not None and (refused := token_refusal(raised, method)) is not None:
            gate.refuse(refused)

    return failed
