"""Installing the app in many workspaces over OAuth, on Bolt: the install flow
(`/slack/install` with Slack's *Add to Slack* button, `/slack/oauth_redirect` exchanging the
code with `oauth.v2.access`), each request authorized with the bot of its own workspace, and
what Slack's `app_uninstalled` and `tokens_revoked` events do.

Slack's rules, as *Installing with OAuth* and the method and event references give them, and
where each is followed:

- The install sends the person to Slack's authorize page with the app's client id, its bot
  scopes and a `state` that the redirect must bring back: Bolt's `AsyncOAuthFlow` issues the
  state (`DatabaseStateStore`), ties it to the browser with a cookie, and refuses a redirect
  whose state is unknown, expired, already used or from another browser.
- The redirect's `code` is exchanged once, within ten minutes, by `oauth.v2.access` with the
  client id and secret; Bolt saves what it answers (`DatabaseInstallationStore`). The exchange
  is a Web API call like any other: Slack documents no redirect for it, and the pooled session
  follows none (the secret, the code and a refresh token would go along), so an answer that
  redirects fails the install with a page that says so (`InstallFlow`).
- An org-wide install of an Enterprise Grid org (`is_enterprise_install`) has no team: it is
  stored and found by its enterprise, and serves every workspace of the org.
- With token rotation on, tokens expire and are renewed with their refresh token
  (`BotTokens`).
- `app_uninstalled` means every token of the install is revoked; `tokens_revoked` lists the
  revoked tokens by kind (`bot`, `oauth`) and user id. Either may come first.

Each request is authorized from what is stored, with no Slack call (`StoredAuthorize`), like
one workspace's `local_authorize`: Bolt's own authorize asks `auth.test` every time, so a Slack
outage would refuse every request.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.async_authorize import AsyncAuthorize
from slack_bolt.oauth.async_callback_options import (
    AsyncCallbackOptions,
    AsyncFailureArgs,
    AsyncSuccessArgs,
)
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackClientError
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine

from bot.outbound import OutboundError
from bot.secrets import REDIRECT_PATH
from bot.slack.errors import TokenNotRenewedError
from bot.slack.replies import PooledRespond
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.installations import (
    STATE_EXPIRES_S,
    DatabaseInstallationStore,
    DatabaseStateStore,
)
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SLACK_FAILURES
from bot.slackweb.rotation import BotTokens
from bot.store import installations, workspaces
from bot.store.db import in_session
from bot.store.errors import TokenDecryptError
from bot.store.installation_tables import InstallationEventKind
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from bot.store.workspaces import Suspension

log = logging.getLogger(__name__)
Listener = Callable[..., Awaitable[None]]

INSTALL_PATH = "/slack/install"
BOT_SCOPES = (
    "commands",
    "chat:write",
    "channels:history",
    "groups:history",
    "channels:read",
    "groups:read",
    "reactions:read",
    "users:read",
    "usergroups:read",
    "im:write",
    "im:history",
    "assistant:write",
    "files:read",
    "files:write",
)
"""What an install asks for: the manifest's bot scopes (a test keeps the two the same). No user
scopes: debatebot acts as its bot only."""
SLACK_AUTHORIZE_URL = "https://slack.com/oauth/v2/authorize"
NOT_INSTALLED = (
    ":warning: debatebot is not installed in this workspace any more (it was uninstalled, or"
    " its token was revoked), so nothing was done. A workspace admin can install it again"
    " from its install page (/slack/install on the bot's address)."
)
"""What a person is told when their workspace has no install (Bolt answers it)."""
UNRENEWED = (
    ":hourglass: Slack could not be reached to renew debatebot's token in this workspace, so"
    " nothing was done (nothing was queued). Try again in a few minutes; if it keeps happening,"
    " tell whoever runs debatebot (its log says why)."
)
"""What a person is told when their workspace's token expired and Slack could not be asked to
renew it (`unrenewed_answer`)."""
REDIRECTED = "slack_redirected"
"""The failure reason of an install whose call to Slack was answered with a redirect."""


def authorize_url(api_url: str) -> str:
    """Slack's authorize page with Slack's Web API, else at the Web API address's own scheme,
    host and port (a stand-in of Slack, like the file host; see DEBATEBOT_SLACK_FILES_URL)."""
    if api_url.rstrip("/") == "https://slack.com/api":
        return SLACK_AUTHORIZE_URL
    scheme, _, rest = api_url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/oauth/v2/authorize"


class StoredAuthorize(AsyncAuthorize):
    """Bolt's authorization of a request from the bot stored for its workspace (or its org's
    org-wide install), its token renewed when due. None when there is none, or its token cannot
    be used for good (refused, or no key opens it): Bolt's `AsyncMultiTeamsAuthorization`
    answers None with `NOT_INSTALLED` (its `user_facing_authorize_error_message`), through the
    request's `response_url` or as the answer's body. `TokenNotRenewedError` when the token
    expired and Slack could not be asked to renew it: that middleware catches only
    `SlackApiError` (which this is not, so no `NOT_INSTALLED`); `AsyncApp.async_dispatch` makes
    the answer a 500 and hands the error to the app's error handler, which answers
    `unrenewed_answer` instead."""

    def __init__(self, tokens: BotTokens) -> None:
        # Named, not super(): mypy's untyped_calls_exclude (pyproject) matches the callee's name.
        AsyncAuthorize.__init__(self)
        self.tokens = tokens

    async def __call__(
        self,
        *,
        context: AsyncBoltContext,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None,
        actor_enterprise_id: str | None = None,
        actor_team_id: str | None = None,
        actor_user_id: str | None = None,
    ) -> AuthorizeResult | None:
        try:
            bot = await self.tokens.bot(
                enterprise_id=enterprise_id,
                team_id=team_id,
                is_enterprise_install=context.is_enterprise_install,
            )
        except (TokenDecryptError, TokenRefusedError) as error:
            # No key for the token, or it expired and Slack refused to renew it (logged there).
            log.error("cannot authorize a request from %s/%s: %s", enterprise_id, team_id, error)
            return None
        except SlackClientError as error:
            # Slack could not be asked (BotTokens logged why): an outage, not an uninstall.
            log.warning(
                "a request from %s was turned away, nothing done: %s; the person is told to try"
                " again in a few minutes",
                installations.key(enterprise_id=enterprise_id, team_id=team_id),
                error,
            )
            raise TokenNotRenewedError(str(error)) from error
        if bot is None:
            log.info("a request from %s/%s, where the app is not installed", enterprise_id, team_id)
            return None
        return AuthorizeResult(
            enterprise_id=enterprise_id or bot.enterprise_id,
            team_id=team_id or bot.team_id,
            bot_id=bot.bot_id or None,
            bot_user_id=bot.bot_user_id or None,
            bot_token=bot.bot_token,
            bot_scopes=bot.bot_scopes,
            user_id=user_id,
        )


async def unrenewed_answer(body: dict[str, Any], context: AsyncBoltContext) -> BoltResponse | None:
    """The answer, in place of Bolt's 500, to a request `StoredAuthorize` turned away with
    `TokenNotRenewedError`, given by the app's error handler (Bolt's
    `AsyncCustomMiddlewareErrorHandler` copies a `BoltResponse` it returns into the answer).

    `UNRENEWED` is told as Bolt tells `NOT_INSTALLED`: through the request's `response_url` (a
    click on a message, a message shortcut), on the pooled session of the client Bolt made
    for the request (`PooledRespond`), else as the answer's body, which Slack shows the person
    who sent a command. A command gets the body at once: it needs no call to a Slack that may
    not be reachable. An event keeps the 500 (None): nobody can be told of it (telling takes
    the token), and Slack sends an event it was answered 500 again, three times within some
    minutes, by when the token may be renewed."""
    if body.get("type") == "event_callback":
        return None
    session = context.client.session
    if context.response_url and not body.get("command") and session is not None:
        try:
            await PooledRespond(response_url=context.response_url, session=session)(
                text=UNRENEWED, response_type="ephemeral", replace_original=False
            )
        except SLACK_FAILURES as error:
            log.warning("could not tell the person through response_url: %s", error)
        else:
            return BoltResponse(status=200, body="")
    return BoltResponse(status=200, body=UNRENEWED)


def oauth_flow(
    *,
    client_id: str,
    client_secret: str,
    redirect_uri: str | None,
    authorization_url: str,
    client: AsyncWebClient,
    store: DatabaseInstallationStore,
    states: DatabaseStateStore,
    engine: Engine,
) -> AsyncOAuthFlow:
    """Bolt's install flow on the bot's stores; a finished install is recorded."""

    async def installed(args: AsyncSuccessArgs) -> BoltResponse:
        done = args.installation
        team = None if done.is_enterprise_install else done.team_id
        await in_session(
            engine,
            lambda s: installations.record_event(
                s,
                enterprise_id=done.enterprise_id,
                team_id=team,
                kind=InstallationEventKind.INSTALLED,
                bot=done.bot_token is not None,
                user_ids=[done.user_id],
            ),
            workspace=EVERY_WORKSPACE,
        )
        # Installed again after an uninstall: its suspended debates go on.
        if team is None:
            resumed = await in_session(
                engine,
                lambda s: workspaces.resume(s, enterprise_id=done.enterprise_id),
                workspace=EVERY_WORKSPACE,
            )
        else:
            workspace = Workspace(team_id=team, enterprise_id=done.enterprise_id)
            resumed = await in_session(engine, workspaces.resume, workspace=workspace)
        log.info(
            "installed in %s by %s%s%s",
            installations.key(enterprise_id=done.enterprise_id, team_id=team),
            done.user_id,
            " (org-wide)" if done.is_enterprise_install else "",
            f"; {resumed} suspended debate(s) resume" if resumed else "",
        )
        return await args.default.success(args)

    async def failed(args: AsyncFailureArgs) -> BoltResponse:
        log.warning(
            "an install failed: %s%s", args.reason, f" ({args.error})" if args.error else ""
        )
        answer = await args.default.failure(args)
        if isinstance(args.error, OutboundError):
            # Bolt's page names only the reason; this one says what happened and what to do.
            return BoltResponse(
                status=answer.status,
                headers={name: list(values) for name, values in answer.headers.items()},
                body=redirected_page(args.error, INSTALL_PATH),
            )
        return answer

    settings = AsyncOAuthSettings(
        client_id=client_id,
        client_secret=client_secret,
        scopes=list(BOT_SCOPES),
        user_scopes=[],
        redirect_uri=redirect_uri,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        authorization_url=authorization_url,
        installation_store=store,
        state_store=states,
        state_expiration_seconds=STATE_EXPIRES_S,
        callback_options=AsyncCallbackOptions(success=installed, failure=failed),
        logger=log,
    )
    return InstallFlow(client=client, logger=log, settings=settings)


class InstallFlow(AsyncOAuthFlow):
    """Bolt's install flow, where a call to Slack answered with a redirect (refused by the
    pooled session, `bot.outbound.refuse_redirects`) fails the install like a refused code:
    Bolt catches only Slack's own errors (`SlackApiError`), so the refusal would otherwise end
    the request with a bare server error."""

    async def handle_callback(self, request: AsyncBoltRequest) -> BoltResponse:
        try:
            return await super().handle_callback(request)
        except OutboundError as error:
            return await self.failure_handler(
                AsyncFailureArgs(
                    request=request,
                    reason=REDIRECTED,
                    error=error,
                    suggested_status_code=502,
                    settings=self.settings,
                    default=self.default_callback_options,
                )
            )


def redirected_page(error: OutboundError, install_path: str) -> str:
    """The page of an install that failed on a redirect: what happened, and what to do."""
    return (
        "<html><head><title>debatebot was not installed</title></head><body>"
        "<h2>debatebot was not installed</h2>"
        f"<p>Slack's answer while finishing the install was a redirect to"
        f" {html.escape(error.target)}, and the bot follows no redirect with its client secret"
        " or the install's code. Something between this server and Slack (a proxy, or"
        " DEBATEBOT_SLACK_API_URL) is rewriting Slack's answers: whoever runs debatebot should"
        " fix that.</p>"
        f'<p>Nothing was saved. Then <a href="{html.escape(install_path)}">install it'
        " again</a>.</p></body></html>"
    )


class Uninstalls:
    """What `app_uninstalled` and `tokens_revoked` do: delete the revoked tokens (with `store`;
    one workspace's token lives in the environment) and record what happened, once per Slack
    event, so the workspace's later requests find no install until it is installed again.

    With OAuth installs, an uninstall (or the bot's token revoked) also suspends the
    workspace's unfinished debates (each stops at its next turn, handed back with its turns
    kept) and drops the messages it is owed, counted on the record; installing again resumes
    the debates (`oauth_flow`). Its audit records stay, under the retention policy, until an
    admin deletes them (`debatebot workspace delete`)."""

    def __init__(self, *, engine: Engine, store: AsyncInstallationStore | None) -> None:
        self.engine = engine
        self.store = store

    async def uninstalled(self, body: dict[str, Any], context: AsyncBoltContext) -> None:
        enterprise_id, team_id = _install_of(context)
        stopped = Suspension(debates=0, dropped=0)
        if self.store is not None:
            await self.store.async_delete_all(enterprise_id=enterprise_id, team_id=team_id)
            stopped = await self._suspend(enterprise_id, team_id, "the app was uninstalled")
        await self._record(
            body, enterprise_id, team_id, InstallationEventKind.UNINSTALLED, True, stopped=stopped
        )
        log.warning(
            "the app was uninstalled from %s: %s",
            installations.key(enterprise_id=enterprise_id, team_id=team_id),
            f"its tokens are deleted, {stopped.debates} debate(s) suspended until it is installed"
            f" again, {stopped.dropped} owed message(s) dropped"
            if self.store is not None
            else "DEBATEBOT_SLACK_BOT_TOKEN no longer works; install the app again and set the"
            " new bot token",
        )

    async def _suspend(
        self, enterprise_id: str | None, team_id: str | None, why: str
    ) -> Suspension:
        """Stop the install's debates and drop what it is owed (bot.store.workspaces)."""
        reason = f"{why} ({installations.key(enterprise_id=enterprise_id, team_id=team_id)})"
        if team_id is None:
            return await in_session(
                self.engine,
                lambda s: workspaces.suspend(s, reason=reason, enterprise_id=enterprise_id),
                workspace=EVERY_WORKSPACE,
            )
        workspace = Workspace(team_id=team_id, enterprise_id=enterprise_id)
        return await in_session(
            self.engine, lambda s: workspaces.suspend(s, reason=reason), workspace=workspace
        )

    async def revoked(
        self, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        enterprise_id, team_id = _install_of(context)
        tokens = event.get("tokens") or {}
        people = [str(user) for user in tokens.get("oauth") or []]
        bot = bool(tokens.get("bot"))
        if self.store is not None:
            for user in people:
                await self.store.async_delete_installation(
                    enterprise_id=enterprise_id, team_id=team_id, user_id=user
                )
        stopped = Suspension(debates=0, dropped=0)
        if self.store is not None and bot:
            await self.store.async_delete_bot(enterprise_id=enterprise_id, team_id=team_id)
            stopped = await self._suspend(enterprise_id, team_id, "the bot's token was revoked")
        await self._record(
            body,
            enterprise_id,
            team_id,
            InstallationEventKind.TOKENS_REVOKED,
            bot,
            people,
            stopped=stopped,
        )
        log.warning(
            "Slack revoked tokens of %s (bot: %s, people: %s)%s",
            installations.key(enterprise_id=enterprise_id, team_id=team_id),
            "yes" if bot else "no",
            ", ".join(people) or "none",
            "; deleted" if self.store is not None else "",
        )

    async def _record(
        self,
        body: dict[str, Any],
        enterprise_id: str | None,
        team_id: str | None,
        kind: InstallationEventKind,
        bot: bool,
        people: Sequence[str] = (),
        *,
        stopped: Suspension,
    ) -> None:
        await in_session(
            self.engine,
            lambda s: installations.record_event(
                s,
                enterprise_id=enterprise_id,
                team_id=team_id,
                kind=kind,
                bot=bot,
                user_ids=people,
                event_id=body.get("event_id"),
                suspended_debates=stopped.debates,
                dropped_messages=stopped.dropped,
            ),
            workspace=EVERY_WORKSPACE,
        )


def _install_of(context: AsyncBoltContext) -> tuple[str | None, str | None]:
    """The ids of the install an event speaks of: an org-wide install's has no team (the
    store's key for it), a workspace's has its team."""
    if context.is_enterprise_install:
        return context.enterprise_id, None
    return context.enterprise_id, context.team_id


def register(
    app: AsyncApp,
    uninstalls: Uninstalls,
    wrap: Callable[[Listener], Listener] = lambda listener: listener,
) -> None:
    """Listen for `app_uninstalled` and `tokens_revoked` (Bolt authorizes neither: their tokens
    are gone), each listener passed through `wrap` (the listeners' acknowledgement first)."""

    async def on_app_uninstalled(body: dict[str, Any], context: AsyncBoltContext) -> None:
        await uninstalls.uninstalled(body, context)

    async def on_tokens_revoked(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        await uninstalls.revoked(body, event, context)

    app.event("app_uninstalled")(wrap(on_app_uninstalled))
    app.event("tokens_revoked")(wrap(on_tokens_revoked))


def local_authorize(token: str, directory: SlackDirectory) -> Callable[..., Any]:
    """Bolt's authorization from what the bot already holds, with no Slack call per request.

    Bolt's default asks Slack (`auth.test`) before the first request is handled, so while
    Slack's Web API is down every `/debate` would be refused unqueued. The bot's user id comes
    from an `auth.test` made in the background and cached.
    """

    async def authorize(
        enterprise_id: str | None = None, team_id: str | None = None, **_: Any
    ) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            bot_token=token,
            bot_user_id=directory.known_bot_user(),
        )

    return authorize
