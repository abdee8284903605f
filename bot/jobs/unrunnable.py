"""Debates a worker ends instead of running: one whose spec cannot run under its protocol (queued
before the intake checked it, or by hand), and one claimed again and again without storing a
turn (each run crashed or stalled). Either is ended FAILED once, with a reason an operator can
read, through the ordinary ending (verdict, seal, messages), so it is never claimed forever."""

from __future__ import annotations

from pydantic import ValidationError

from bot.store.debate_tables import Debate
from engine.errors import SpecError
from engine.models import DebateSpec
from engine.protocols import checked_protocol
from engine.readable import readable

MAX_FRUITLESS_CLAIMS = 5
"""Claims that stored no turn after which a debate is ended. A claim that makes progress stores
at least one turn, so a debate claimed more than its stored turns plus this many times had at
least this many claims come to nothing (a drained worker's hand-back without a call counts
too, which this many restarts in a row will not reach)."""


def why_not_run(
    debate: Debate, spec: DebateSpec, stored_turns: int, limit: int = MAX_FRUITLESS_CLAIMS
) -> str | None:
    """Why the claimed `debate` is ended instead of run, or None to run it. `stored_turns` is
    what it has stored (its claims before this one that made progress stored at least one
    each)."""
    fruitless = debate.claims - 1 - stored_turns
    if fruitless >= limit:
        return (
            f"workers claimed this debate {debate.claims} times and it stored {stored_turns}"
            f" turn{'s' * (stored_turns != 1)}, so at least {fruitless} runs stopped without"
            " progress (a worker crashed or stalled on it each time; the worker logs say why)."
            " It was ended rather than claimed again"
        )
    try:
        checked_protocol(spec)
    except SpecError as error:
        return f"its spec cannot run: {error}"
    return None


def stored_spec(debate: Debate) -> tuple[DebateSpec, str | None]:
    """The claimed debate's spec, and None; or, when its stored spec cannot be read (written by
    hand, or by a version whose spec differed), a stand-in with its question and protocol to
    record its ending on, and why it is ended. The debate row keeps the stored spec, sealed
    with the ending as always."""
    try:
        return DebateSpec.model_validate_json(debate.spec_json), None
    except ValidationError as error:
        why = f"its stored spec cannot be read ({readable(error)}); the debate was not run"
    try:
        return DebateSpec(question=debate.question, protocol=debate.protocol), why
    except ValidationError:
        stand_in = f"debate {debate.id}, whose stored spec and question cannot be read"
        return DebateSpec(question=stand_in, protocol=debate.protocol), why
