"""How each protocol reads in a thread: one message per round (or phase), the protocol's own
outcome in the verdict, and the live "who is speaking" line of the parent message.

Each protocol's definition renders these as neutral views (`engine.protocols.definition`);
here they become Block Kit (`bot.messages.render`, which escapes every string once). A record
or a debate of a protocol nobody registered is an error, never rendered as another protocol's.
"""

from __future__ import annotations

from bot.messages.kit import Block, Message
from bot.messages.render import blocks
from bot.messages.render import round_messages as rendered
from engine.events import TurnStarted
from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase
from engine.protocols import definition_for

JUDGING = (Role.MODERATOR, Role.JUDGE, Role.INDEPENDENT_JUDGE)
"""Turns during which the parent says the debate is being decided."""


def round_messages(record: RoundRecordBase, *, max_rounds: int) -> list[Message]:
    """One round or phase as one threaded message (more only if it is huge); `max_rounds` is the
    spec's, for the protocols whose record does not carry it. The record's `kind` names its
    protocol; an unknown one raises `SpecError`."""
    view = definition_for(record.kind).view.round(record, max_rounds)
    return rendered(view)


def outcome_sections(result: DebateResult) -> list[Block]:
    """The protocol's own outcome for the verdict message (the consensus report, the structured
    totals, the panel's aggregation, the stances judgment); empty where the protocol has none
    (the adversarial verdict is the moderator's) and for runs that ended before an outcome."""
    return blocks(definition_for(result.spec.protocol).view.outcome(result))


def progress(event: TurnStarted, spec: DebateSpec) -> tuple[str, str]:
    """The parent's status and its "who is speaking now" line for a turn that starts, e.g.
    ("running", "critic is challenging the proposal · round 1 of 2")."""
    status = "moderating" if event.role in JUDGING else "running"
    if event.role is Role.INDEPENDENT_JUDGE:
        return status, "an independent judge is reading the record again, blind to the verdict"
    if event.role is Role.TRIAGE:
        return status, "checking whether this needs a debate"
    return status, definition_for(spec.protocol).plan.progress(event, spec)
