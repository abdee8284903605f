"""Errors of the Slack Web API clients; each says what Slack answered and whether to retry."""

from __future__ import annotations

from typing import Any


class SlackWebError(Exception):
    """Base of the Web API clients' errors."""


class PostError(SlackWebError):
    """A Slack write failed: Slack's error code (or `http_5xx`, `timeout`, `unreachable`),
    whether trying again later may help, and how long Slack asked to wait."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.retry_after_s = retry_after_s


TOKEN_REFUSED = frozenset(
    {"token_revoked", "token_expired", "invalid_auth", "account_inactive", "not_authed"}
    | {"team_access_not_granted", "missing_scope"}
)
"""Slack's answers that refuse the bot token itself, whatever the call (the common errors of
every Web API method: "invalid_auth", "not_authed", "account_inactive", "token_revoked",
"token_expired", "team_access_not_granted" ("The token used is not granted the specific
workspace access required to complete this request"), and "missing_scope", which names the
scope in `needed`). No message is at fault: every other call fails the same way until the token
is fixed."""


class TokenRefusedError(SlackWebError):
    """Slack refused the bot token (`code`; `needed`: the scope a `missing_scope` names). Not a
    `PostError`: the message is not at fault, so nothing catches it as one and gives it up."""

    def __init__(self, message: str, *, code: str, needed: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.needed = needed


class UnthreadedError(PostError):
    """Slack took a reply but stored it outside the thread it was meant for (`stray`: where it
    landed). The thread is lost to the bot; nothing more may be posted at the top level."""

    def __init__(self, message: str, *, stray: Any) -> None:
        super().__init__(message, code="unthreaded")
        self.stray = stray
