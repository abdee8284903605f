"""Errors of the intake: a request it did not admit, said for the person who asked."""

from __future__ import annotations


class IntakeError(Exception):
    """Base of the intake's errors."""


class NotAdmittedError(IntakeError):
    """The request was not queued: the message says why and what to change (a setting, a
    limit, an invitation), and nothing was spent or stored."""


class LimitNotAdmittedError(NotAdmittedError):
    """Not queued because it would pass a limit on debates in flight or a monthly cap: the
    same request may be admitted later (a debate finishes, the month turns)."""


class TokenRefusedNotAdmittedError(NotAdmittedError):
    """Not queued because Slack refuses the bot token of the request's workspace (`code`;
    `scope`: the one a `missing_scope` names): a request Slack will not send again (an event)
    is kept for when the token works, rather than told this."""

    def __init__(self, message: str, *, code: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.scope = scope
