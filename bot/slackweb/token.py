"""Whether Slack takes the bot token. A refusal (revoked, invalid, a workspace gone, a scope
missing) is no message's fault: every call fails alike until the token is fixed. So while it
lasts delivery pauses with every message still owed, workers claim no new debate, new requests
are refused with the reason, and `/healthz` answers 503 naming the setting; once the token
answers again, everything owed is delivered.

With OAuth installs each workspace has a token of its own, and a refusal holds that workspace
only; it is kept in the store, for every replica (bot.store.refusals), and told with
`workspace_token_fix` and `workspace_refusal`."""

from __future__ import annotations

import logging

from bot.slackweb.errors import TokenRefusedError

log = logging.getLogger(__name__)

SETTING = "DEBATEBOT_SLACK_BOT_TOKEN"


def token_fix(code: str, needed: str | None = None) -> str:
    """What the bot's admin does about a refused token."""
    if code == "missing_scope":
        scope = f"the `{needed}` scope" if needed else "a scope the bot needs"
        return (
            f"add {scope} under OAuth & Permissions → Scopes (or from slack/manifest.yml),"
            f" reinstall the app, set {SETTING} to the new token and restart"
        )
    return (
        f"reinstall the app to the workspace (OAuth & Permissions → Reinstall), set {SETTING}"
        " to its bot token (xoxb-…) and restart"
    )


INSTALL_PAGE = "/slack/install on the bot's address"


def workspace_token_fix(code: str, needed: str | None = None) -> str:
    """What is done about one workspace's refused token (OAuth installs): install the app
    there again, which stores new tokens (with every scope the app asks for)."""
    if code == "team_access_not_granted":
        return (
            "grant the app access to this workspace (an org admin, in the org's app settings),"
            f" or install it in this workspace ({INSTALL_PAGE})"
        )
    if code == "missing_scope":
        scope = f"the `{needed}` scope" if needed else "a scope the bot needs"
        return f"install the app in this workspace again ({INSTALL_PAGE}) to grant it {scope}"
    return f"install the app in this workspace again ({INSTALL_PAGE})"


def workspace_refusal(code: str, needed: str | None = None) -> str:
    """What a person who asks for a debate is told while Slack refuses their workspace's
    token."""
    return (
        f"Slack refused my bot token in this workspace ({code}), so I could not post this debate"
        f" and nothing was queued. A workspace admin must {workspace_token_fix(code, needed)}"
    )


class TokenGate:
    """The process's view of the bot token: refused (with Slack's code) or taken."""

    def __init__(self) -> None:
        self.code: str | None = None
        self.needed: str | None = None

    @property
    def refused(self) -> bool:
        return self.code is not None

    def refuse(self, error: TokenRefusedError) -> None:
        """Slack refused the token: logged once per code, with the setting and the fix."""
        if (self.code, self.needed) == (error.code, error.needed):
            return
        self.code, self.needed = error.code, error.needed
        log.error(
            "Slack refused the bot token (%s): %s. Delivery is paused (every message stays"
            " owed) and no new debate is started until the token works; to fix it, %s",
            error.code,
            SETTING,
            token_fix(error.code, error.needed),
        )

    def refused_error(self) -> TokenRefusedError | None:
        """The refusal as it stands (None when the token is taken)."""
        if self.code is None:
            return None
        return TokenRefusedError(
            f"Slack refused the bot token: {self.code}", code=self.code, needed=self.needed
        )

    def accept(self) -> None:
        """Slack takes the token again."""
        if self.code is not None:
            log.warning("Slack takes %s again: delivering every owed message", SETTING)
        self.code, self.needed = None, None

    def problem(self) -> str:
        """What `/healthz` says while the token is refused."""
        return f"token refused ({SETTING})"

    def refusal(self) -> str:
        """What a person who asks for a debate is told while the token is refused."""
        return (
            f"Slack refused my bot token ({self.code}), so I could not post this debate and"
            f" nothing was queued. The bot's admin must {token_fix(self.code or '', self.needed)}"
        )
