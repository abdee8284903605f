"""Errors of the Slack layer; each message is written for the person who has to act on it."""

from __future__ import annotations

from bot.messages import kit


class SlackLayerError(Exception):
    """Base of the Slack layer's errors."""


class CommandError(SlackLayerError):
    """A `/debate` invocation or a settings value that cannot be used; shown to the user as is."""


class RefusedTokenError(CommandError):
    """Slack refuses the bot token of the request's workspace (`code`; `scope`: the one a
    `missing_scope` names). A command or a form is told why, as any CommandError; an event,
    which Slack will not send again, is kept and handled once the token works
    (bot.slack.held)."""

    def __init__(self, message: str, *, code: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.scope = scope


class SlackUnavailableError(SlackLayerError):
    """Slack failed for a moment (a 5xx, a rate limit, a timeout, no connection) and kept
    failing through a few quick tries: what it was asked for may be there a little later
    (`code`: Slack's, or `http_5xx`, `timeout`, `unreachable`)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class FormError(SlackLayerError):
    """A submitted form has fields to fix: block id -> what to fix, shown under each field."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {why}" for field, why in errors.items()))
        self.errors = errors


class NotAllowedError(SlackLayerError):
    """The user may not do this (not a reviewer, not a channel owner or admin); `plain` says so
    without mentions, for places that show text raw (a form's field errors)."""

    def __init__(self, message: str, *, plain: str | None = None) -> None:
        super().__init__(message)
        self.plain = plain or message


class TokenNotRenewedError(SlackLayerError):
    """A request's workspace has a bot token that expired, and Slack could not be asked to
    renew it (unreachable, or it could not do it now): nothing was done, and the same request
    may work in a few minutes."""


class ReviewGoneError(NotAllowedError):
    """The review request a reviewer decides no longer exists (its row was removed, or its
    debate was deleted): nothing can be recorded."""


def said(error: CommandError | NotAllowedError) -> str:
    """An error as the user reads it: a command error can quote what they typed, so it is
    escaped; a refusal is built from stored ids and mentions reviewers on purpose."""
    return kit.escape(str(error)) if isinstance(error, CommandError) else str(error)
