"""Errors of the Slack layer; each message is written for the person who has to act on it."""

from __future__ import annotations


class SlackLayerError(Exception):
    """Base of the Slack layer's errors."""


class CommandError(SlackLayerError):
    """A `/debate` invocation or a settings value that cannot be used; shown to the user as is."""


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
