"""What a protocol tells the confidence model about its own result (`engine.scoring`): whether
it reached a verdict, what it left unanswered, the level its decider declared, and the record an
independent judge reads again (`BlindView`, asked by `engine.judging`).

Each protocol measures "unanswered" in its own terms (its `evidence` method says how): critic
points no rebuttal answers, opposing arguments the structured trace does not refute, votes
against the decision, panelists outside the chosen answer, the judge's missing lead over the
next stance. Each is a share in [0, 1] with a note a reviewer reads in a second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel

from engine.models import ConfidenceLevel, Decision, ModelSettings, ShortText

if TYPE_CHECKING:
    from engine.protocols.outputs import Outputs

DECLARED = {ConfidenceLevel.LOW: 0.0, ConfidenceLevel.MODERATE: 0.5, ConfidenceLevel.HIGH: 1.0}
"""A declared level as the `declared` component."""

DECISION_GROUPS: Mapping[str, str] = {
    Decision.ACCEPT.value: "go ahead",
    Decision.ACCEPT_WITH_CONDITIONS.value: "go ahead",
    Decision.REVISE.value: "not as it stands",
    Decision.REJECT.value: "not as it stands",
    Decision.ESCALATE.value: "undecided",
}
"""Decisions that count as the same for agreement: two judges who differ only in the conditions
(accept, or accept with conditions) agree on what the team does next, as do two who send the
proposal back (revise, or reject)."""

POSITION = "position:"
"""How a decision naming one of the positions is written: `position:<index>`."""
MARK = re.compile(r"\u27e6(\d+)\u27e7")
"""Where an entry's text names a position (`⟦0⟧`), written by its index: the judge reads the
position's letter there, which depends on the swap."""


def mark(position: int) -> str:
    """The mark that names `position` in an entry's text."""
    return f"\u27e6{position}\u27e7"


class IndependentJudgment(BaseModel):
    """An independent judge's answer: its reasons, then its decision (one of the choices the
    record offers; `engine.judging.judgment_type` restricts it per debate)."""

    reasoning: ShortText
    decision: str


@dataclass(frozen=True)
class Measure:
    """One component's value (None: not measured) and what it was, for the reviewer."""

    value: float | None
    note: str = ""


@dataclass(frozen=True)
class Entry:
    """One position's turn in one round of the record, as the judge reads it."""

    position: int
    round: int
    text: str


@dataclass(frozen=True)
class BlindView:
    """A debate's record as an independent judge reads it: positions (what each argues, never
    who), each round's turns, and the decisions it may give; no verdict, moderator or count."""

    positions: tuple[str, ...]
    entries: tuple[Entry, ...]
    choices: tuple[str, ...]
    """The decisions the judge may give besides naming a position."""
    explain: str
    """What the decision field means, for the judge's prompt."""
    decided: str
    """The verdict's decision, as a choice or `position:<index>`."""
    decided_by: ModelSettings
    """The model that decided the debate: a judge on it differs only in what it was shown."""
    outputs: Outputs
    """The protocol's envelope, so a judge's call shares the debate's cached prefix."""
    round: int
    """The round the judges' turns are recorded under (the debate's last)."""
    names: tuple[str, ...] = ()
    """Who each position is, for the record of a decision naming one (debaters' names)."""
    pick_position: bool = False
    """Whether the judge may name a position as its decision (the stances protocol)."""
    preface: str = ""
    """What every position argues about (the adversarial proposition), before the record."""
    phases: tuple[str, ...] = ()
    """The names of the record's rounds, when they are phases (the structured protocol)."""
    groups: Mapping[str, str] = field(default_factory=lambda: dict(DECISION_GROUPS))
    """Decisions that count as the same (see `DECISION_GROUPS`); a decision not listed is
    only itself."""

    def same(self, decision: str) -> bool:
        """Whether `decision` (a choice or `position:<index>`) is the verdict's."""
        return self.groups.get(decision, decision) == self.groups.get(self.decided, self.decided)

    def told(self, decision: str) -> str:
        """`decision` as the debate states it: a position by its debater's name."""
        if decision.startswith(POSITION):
            index = int(decision.removeprefix(POSITION))
            return self.names[index] if index < len(self.names) else decision
        return decision


@dataclass(frozen=True)
class ProtocolEvidence:
    """What a protocol reports about its result for the confidence model."""

    reached: bool
    """Whether the run reached a verdict (otherwise its confidence is 0 and nothing is judged)."""
    unanswered: Measure = Measure(None)
    declared: float | None = None
    """The decider's own level as the `declared` component, when it declared one."""
    declared_note: str = ""
    view: BlindView | None = None


NO_VERDICT = ProtocolEvidence(reached=False)
"""A run that ended before its protocol reached a verdict."""


def share_note(left: int, total: int, what: str) -> Measure:
    """`left` of `total` as a share, noted as "<left> of <total> <what>"."""
    return Measure(left / total if total else 0.0, f"{left} of {total} {what}")
