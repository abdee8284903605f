"""Many workspaces behind the Slack emulator (`SlackEmulator.tenancy`): OAuth installs through
Slack's authorize page and `oauth.v2.access`, with token rotation; each workspace's own bot
token, refused on another workspace's channels; and the events uninstalling sends.

What Slack answers, as its references give it: `oauth.v2.access` takes the client id and
secret (HTTP Basic, as slack_sdk sends them, or as arguments) and refuses an unknown id
(`invalid_client_id`), a wrong secret (`bad_client_secret`), a code that is unknown, used or
older than ten minutes (`invalid_code`), a `redirect_uri` other than the authorize request's
(`bad_redirect_uri`), a grant type it does not know (`invalid_grant_type`) and a refresh token
that is unknown or already used (`invalid_refresh_token`: "The refresh token is then
revoked"). With rotation on, access tokens expire after `lifetime_s` (12 hours) and a call with
an expired one gets `token_expired`; a revoked one gets `token_revoked`; an unknown one
`invalid_auth`. A token used on a channel of another workspace gets `channel_not_found`, which
is what Slack answers for a channel the token cannot see; a channel several workspaces share
(Slack Connect, or one shared across an Enterprise Grid org) has one id in each, and each of
their tokens sees it. Without rotation, installing again
gives the install the bot token it has. An org-wide install (Enterprise Grid) has no team: its
token serves every workspace of the org.

Slack can also refuse an install's token with no uninstall event (`refuse`): every call with it,
`auth.test` included, gets one of the codes Slack lists among every method's errors for a token
it will not take (`REFUSALS`), until Slack takes it again (`accept`); installing again then
issues a new token, as for a revoked one. Or the token can lack a scope (`refuse` with
`missing_scope`): each method that needs it (`NEEDS`) answers `missing_scope`, naming it as
`needed` and the token's scopes as `provided`, while the others, `auth.test` among them (it
needs none), work; every answer to a call with a live token names its scopes in the
`x-oauth-scopes` header, as Slack's do. Taken again, or installed again (the install asks for
the scope), the token has it.
"""

from __future__ import annotations

import base64
import itertools
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

CLIENT_ID = "1234567890.9876543210"
CLIENT_SECRET = "e2e0client0secret0a1b2c3d4e5f6a7b8"
APP_ID = "A1"
CODE_LIFETIME_S = 600.0
SCOPES = "commands,chat:write"
REFUSALS = frozenset(
    {
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_authed",
        "team_access_not_granted",
        "missing_scope",
    }
)
"""The common errors of every Web API method that refuse the token ("Authentication token is
for a deleted user or workspace", "The token used is not granted the specific workspace access
required to complete this request", "The token used is not granted the specific scope
permissions required to complete this request", …)."""
NEEDS = {
    "chat.postMessage": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "chat.startStream": "chat:write",
    "chat.appendStream": "chat:write",
    "chat.stopStream": "chat:write",
    "conversations.open": "im:write",
    "users.info": "users:read",
    "users.list": "users:read",
    "usergroups.users.list": "usergroups:read",
    "files.info": "files:read",
    # "The files:write scope allows your app to upload files" (Working with files).
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "assistant.threads.setStatus": "assistant:write",
}
"""The bot scope each method needs, as its reference names it (of those a token here can lack;
`auth.test`, `views.publish` and `chat.getPermalink` need none)."""
SCOPES_HEADER = "x-oauth-scopes"


@dataclass
class Workspace:
    team_id: str
    name: str
    channels: set[str] = field(default_factory=set)
    enterprise_id: str | None = None
    bot_user_id: str = ""
    bot_id: str = ""

    def __post_init__(self) -> None:
        self.bot_user_id = self.bot_user_id or f"UB{self.team_id}"
        self.bot_id = self.bot_id or f"BB{self.team_id}"


@dataclass
class Grant:
    """One access token Slack issued, for an install: a workspace, or an org (`team_id` None)."""

    token: str
    enterprise_id: str | None
    team_id: str | None
    expires_at: float | None = None
    revoked: bool = False
    refused: str | None = None
    """Slack refuses the token with this code (`Workspaces.refuse`)."""
    scope: str = SCOPES
    """The scopes the token was granted, comma-separated."""
    lacks: str | None = None
    """A scope of `scope` Slack no longer grants it (`Workspaces.refuse` with `missing_scope`)."""

    def scopes(self) -> list[str]:
        return [s for s in self.scope.split(",") if s and s != self.lacks]


@dataclass
class Code:
    team_id: str | None
    enterprise_id: str | None
    user_id: str
    scope: str
    redirect_uri: str | None
    issued_at: float
    used: bool = False


@dataclass
class Workspaces:
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET
    redirect_url: str = ""
    """The app's Redirect URL (its manifest's `oauth_config.redirect_urls`)."""
    rotation: bool = False
    lifetime_s: int = 43_200
    teams: dict[str, Workspace] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)
    refresh_tokens: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Refresh token -> the install (enterprise, team) it renews; removed once used."""
    codes: dict[str, Code] = field(default_factory=dict)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    """Every `oauth.v2.access` call: its arguments and the error it got, if any."""
    _n: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(
        self,
        team_id: str,
        *,
        channels: set[str],
        enterprise_id: str | None = None,
        token: str | None = None,
        bot_user_id: str = "",
        bot_id: str = "",
    ) -> Workspace:
        """A workspace; with `token`, already installed by hand with that bot token."""
        workspace = Workspace(
            team_id,
            f"Workspace {team_id}",
            channels,
            enterprise_id,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
        )
        self.teams[team_id] = workspace
        if token is not None:
            self.grants[token] = Grant(token, enterprise_id, team_id)
        return workspace

    # --- Slack's authorize page ------------------------------------------------------------

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """The person approves the install: (status, headers, body), a redirect back to the
        app with a code and the state. Beyond Slack's arguments, `as_user` names who installs
        (default UINSTALLER), `org=1` installs org-wide in the team's org, `deny=1` cancels."""
        if query.get("client_id") != self.client_id:
            return 400, {}, "invalid_client_id"
        if not query.get("scope"):
            return 400, {}, "invalid_scope"
        redirect = query.get("redirect_uri") or self.redirect_url
        if not redirect or (self.redirect_url and redirect != self.redirect_url):
            return 400, {}, "bad_redirect_uri"
        back: dict[str, str] = {}
        if "state" in query:
            back["state"] = query["state"]
        if query.get("deny") == "1":
            return (
                302,
                {"Location": f"{redirect}?{urlencode({'error': 'access_denied', **back})}"},
                "",
            )
        team = self.teams.get(query.get("team") or next(iter(self.teams), ""))
        if team is None:
            return 400, {}, "team_not_found"
        org = query.get("org") == "1" and team.enterprise_id is not None
        code = f"code-{next(self._n)}-{time.time_ns()}"
        self.codes[code] = Code(
            team_id=None if org else team.team_id,
            enterprise_id=team.enterprise_id,
            user_id=query.get("as_user") or "UINSTALLER",
            scope=query["scope"],
            redirect_uri=query.get("redirect_uri"),
            issued_at=time.monotonic(),
        )
        location = f"{redirect}?{urlencode({'code': code, **back})}"
        return 302, {"Location": location}, ""

    # --- the Web API -----------------------------------------------------------------------

    def answer(
        self, method: str, params: dict[str, Any], authorization: str
    ) -> dict[str, Any] | None:
        """What Slack answers `method` here: `oauth.v2.access` and `auth.test` whole, any other
        method's refusal of its token, scope or channel; None: the method goes on as usual."""
        if method == "oauth.v2.access":
            answer = self._access(params, authorization)
            self.exchanges.append({**params, "error": answer.get("error")})
            return answer
        grant, refusal = self._grant(authorization)
        if refusal is not None:
            return {"ok": False, "error": refusal}
        assert grant is not None
        if method == "auth.test":
            return self._auth_test(grant)
        if grant.lacks is not None and NEEDS.get(method) == grant.lacks:
            needed, provided = grant.lacks, ",".join(grant.scopes())
            return {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}
        channel = params.get("channel") or params.get("channel_id")
        if isinstance(channel, str) and not self._sees(grant, channel):
            return {"ok": False, "error": "channel_not_found"}
        return None

    def _grant(self, authorization: str) -> tuple[Grant | None, str | None]:
        token = authorization.removeprefix("Bearer ").strip()
        if not authorization.startswith("Bearer ") or not token:
            return None, "not_authed"
        grant = self.grants.get(token)
        if grant is None:
            return None, "invalid_auth"
        if grant.revoked:
            return None, "token_revoked"
        if grant.refused is not None:
            return None, grant.refused
        if grant.expires_at is not None and grant.expires_at <= time.time():
            return None, "token_expired"
        return grant, None

    def bot_user_of(self, authorization: str) -> str | None:
        """The bot user a live token posts as (its workspace's), or None."""
        grant, refusal = self._grant(authorization)
        if grant is None or refusal is not None:
            return None
        return self._team_of(grant).bot_user_id

    def headers(self, authorization: str) -> dict[str, str]:
        """The headers of an answer to a call with `authorization`: a live token's scopes."""
        grant, refusal = self._grant(authorization)
        if grant is None or refusal is not None:
            return {}
        return {SCOPES_HEADER: ",".join(grant.scopes())}

    def _sees(self, grant: Grant, channel: str) -> bool:
        members = [t for t in self.teams.values() if channel in t.channels]
        if not members:
            return True  # a DM or a channel no workspace claims
        if grant.team_id is None:
            return any(t.enterprise_id == grant.enterprise_id for t in members)
        return any(t.team_id == grant.team_id for t in members)

    def _auth_test(self, grant: Grant) -> dict[str, Any]:
        team = self._team_of(grant)
        return {
            "ok": True,
            "url": f"https://{team.team_id.lower()}.emulated.slack.com/",
            "team": team.name,
            "user": "debatebot",
            "team_id": grant.team_id or grant.enterprise_id,
            "user_id": team.bot_user_id,
            "bot_id": team.bot_id,
            "enterprise_id": grant.enterprise_id,
            "is_enterprise_install": grant.team_id is None,
        }

    def _team_of(self, grant: Grant) -> Workspace:
        if grant.team_id is not None:
            return self.teams[grant.team_id]
        return next(t for t in self.teams.values() if t.enterprise_id == grant.enterprise_id)

    def _client(self, params: dict[str, Any], authorization: str) -> str | None:
        """The refusal of the client's credentials, if any."""
        client_id, secret = params.get("client_id"), params.get("client_secret")
        if authorization.startswith("Basic "):
            decoded = base64.b64decode(authorization.removeprefix("Basic ")).decode()
            client_id, _, secret = decoded.partition(":")
        if client_id != self.client_id:
            return "invalid_client_id"
        if secret != self.client_secret:
            return "bad_client_secret"
        return None

    def _access(self, params: dict[str, Any], authorization: str) -> dict[str, Any]:
        refused = self._client(params, authorization)
        if refused is not None:
            return {"ok": False, "error": refused}
        grant_type = params.get("grant_type") or "authorization_code"
        if grant_type == "refresh_token":
            install = self.refresh_tokens.pop(str(params.get("refresh_token")), None)
            if install is None:
                return {"ok": False, "error": "invalid_refresh_token"}
            return self._issue(*install, user_id=None, scope=SCOPES, reinstall=False)
        if grant_type != "authorization_code":
            return {"ok": False, "error": "invalid_grant_type"}
        code = self.codes.get(str(params.get("code")))
        if code is None or code.used or time.monotonic() - code.issued_at > CODE_LIFETIME_S:
            return {"ok": False, "error": "invalid_code"}
        if params.get("redirect_uri") != code.redirect_uri:
            return {"ok": False, "error": "bad_redirect_uri"}
        code.used = True
        return self._issue(
            code.enterprise_id, code.team_id, user_id=code.user_id, scope=code.scope, reinstall=True
        )

    def _issue(
        self,
        enterprise_id: str | None,
        team_id: str | None,
        *,
        user_id: str | None,
        scope: str,
        reinstall: bool,
    ) -> dict[str, Any]:
        n = next(self._n)
        current = next(
            (
                g
                for g in self.grants.values()
                if (g.enterprise_id, g.team_id) == (enterprise_id, team_id)
                and not g.revoked
                and g.refused is None
            ),
            None,
        )
        answer: dict[str, Any] = {"ok": True, "app_id": APP_ID, "token_type": "bot", "scope": scope}
        if self.rotation:
            grant = Grant(
                f"xoxe.xoxb-1-{team_id or enterprise_id}-{n}",
                enterprise_id,
                team_id,
                expires_at=time.time() + self.lifetime_s,
            )
            refresh = f"xoxe-1-{team_id or enterprise_id}-{n}"
            self.refresh_tokens[refresh] = (enterprise_id, team_id)
            answer |= {"refresh_token": refresh, "expires_in": self.lifetime_s}
        elif current is not None and reinstall:
            grant = current  # Slack keeps an install's bot token across installs
            if grant.lacks in scope.split(","):
                grant.lacks = None
        else:
            grant = Grant(f"xoxb-{team_id or enterprise_id}-{n}", enterprise_id, team_id)
        grant.scope = scope
        self.grants[grant.token] = grant
        team = self._team_of(grant)
        answer |= {
            "access_token": grant.token,
            "bot_user_id": team.bot_user_id,
            "team": None if team_id is None else {"id": team.team_id, "name": team.name},
            "enterprise": (
                None
                if enterprise_id is None
                else {"id": enterprise_id, "name": f"Org {enterprise_id}"}
            ),
            "is_enterprise_install": team_id is None,
        }
        if user_id is not None:
            answer["authed_user"] = {"id": user_id}
        return answer

    # --- what people and time do -----------------------------------------------------------

    def expire(self, token: str) -> None:
        """The token reached its expiry."""
        self.grants[token].expires_at = time.time() - 1

    def refuse(
        self,
        team_id: str | None,
        code: str,
        enterprise_id: str | None = None,
        *,
        scope: str = "chat:write",
    ) -> None:
        """Slack refuses the install's live tokens with `code` (one of `REFUSALS`), though
        nothing was uninstalled and no event is sent; with `missing_scope`, only the methods
        that need `scope`, which the tokens no longer have."""
        assert code in REFUSALS, f"{code} is not an answer that refuses a token"
        assert code != "missing_scope" or scope in NEEDS.values(), f"no method here needs {scope}"
        for token in self.tokens_of(team_id, enterprise_id):
            if code == "missing_scope":
                self.grants[token].lacks = scope
            else:
                self.grants[token].refused = code

    def accept(self, team_id: str | None, enterprise_id: str | None = None) -> None:
        """Slack takes the install's refused tokens again (an account reactivated, access
        granted again, the scope granted)."""
        for grant in self.grants.values():
            if (grant.enterprise_id, grant.team_id) == (enterprise_id, team_id):
                grant.refused = None
                grant.lacks = None

    def tokens_of(self, team_id: str | None, enterprise_id: str | None = None) -> list[str]:
        """The live access tokens of an install (an org-wide one: no team), oldest first."""
        return [
            g.token
            for g in self.grants.values()
            if (g.enterprise_id, g.team_id) == (enterprise_id, team_id) and not g.revoked
        ]

    def uninstall(
        self, team_id: str | None, enterprise_id: str | None = None
    ) -> list[dict[str, Any]]:
        """A workspace admin removes the app: every token of the install is revoked, and the
        Events API bodies Slack then sends the app are returned (`tokens_revoked` with the bot's
        user id, then `app_uninstalled`; Slack does not promise their order)."""
        for grant in self.grants.values():
            if (grant.enterprise_id, grant.team_id) == (enterprise_id, team_id):
                grant.revoked = True
        for refresh, install in list(self.refresh_tokens.items()):
            if install == (enterprise_id, team_id):
                del self.refresh_tokens[refresh]
        team = self._team_of(Grant("", enterprise_id, team_id))
        outer: dict[str, Any] = {
            "token": "unused",
            "team_id": team_id or enterprise_id,
            "api_app_id": APP_ID,
            "type": "event_callback",
            "event_time": int(time.time()),
        }
        if enterprise_id is not None:
            outer |= {"enterprise_id": enterprise_id, "is_enterprise_install": team_id is None}
        revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": [team.bot_user_id]}}
        return [
            {**outer, "event_id": f"EvRevoke{next(self._n)}", "event": revoked},
            {**outer, "event_id": f"EvGone{next(self._n)}", "event": {"type": "app_uninstalled"}},
        ]
