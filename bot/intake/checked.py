"""The one check every request's spec passes before anything is stored: built by policy,
validated, and checked against its protocol (round cap, options, debaters), so a request that
cannot run is refused with a sentence instead of being queued to fail in a worker. The intake
(every Slack trigger) and `debatebot run` both check through `checked_spec`."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from bot.intake.errors import NotAdmittedError
from bot.settings import SettingsError
from engine.errors import SpecError
from engine.models import DebateSpec
from engine.protocols import checked_protocol
from engine.readable import readable

ASKED_AS = {
    "question": "the question",
    "context": "the documents",
    "max_rounds": "--rounds",
    "min_rounds": "--rounds",
    "budget_usd": "--budget",
    "judges": "--judges",
    "escalation_threshold": "the escalation threshold",
}
"""A spec's fields as a person gives them (`/debate` and `debatebot run` share these flags)."""


def checked_spec(build: Callable[[], DebateSpec]) -> DebateSpec:
    """The spec `build` makes, checked to run under its protocol; NotAdmittedError, in
    sentences naming what the person gave, when it cannot."""
    try:
        spec = build()
        checked_protocol(spec)
    except ValidationError as error:
        raise NotAdmittedError(f"cannot start this debate: {readable(error, ASKED_AS)}") from error
    except (SpecError, SettingsError) as error:
        raise NotAdmittedError(f"cannot start this debate: {error}") from error
    return spec
