"""Errors of the Slack layer; each message is written for the person who has to act on it."""

from __future__ import annotations


class SlackLayerError(Exception):
    """Base of the Slack layer's errors."""


class CommandError(SlackLayerError):
    """A `/debate` invocation or a settings value that cannot be used; shown to the user as is."""


class NotAllowedError(SlackLayerError):
    """The user may not do this (not a reviewer, not a channel owner or admin)."""


class PostError(SlackLayerError):
    """Slack refused a message (after retries for rate limits); carries Slack's error code."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code
