"""Errors of the intake: a request it did not admit, said for the person who asked."""

from __future__ import annotations


class IntakeError(Exception):
    """Base of the intake's errors."""


class NotAdmittedError(IntakeError):
    """The request was not queued: the message says why and what to change (a setting, a
    limit, an invitation), and nothing was spent or stored."""
