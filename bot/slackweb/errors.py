"""Errors of the Slack Web API clients; each says what Slack answered and whether to retry."""

from __future__ import annotations


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
