"""What the application knows about a protocol, declared once beside its engine class: its
rounds, options, flags, labels, live-plan tasks, how its rounds and outcome read, and what its
confidence components mean. The registry (`engine.protocols`) holds one `ProtocolDefinition` per
protocol; the bot reads them and never tests a protocol's name.

A protocol's view renders into the neutral values of `engine.views` (no Slack here: the bot
turns them into Block Kit, a web page into HTML).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.errors import EngineError
from engine.events import TurnStarted
from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase, TurnRecord
from engine.protocols.base import DebateProtocol
from engine.views import Block, RoundView

TurnKey = tuple[int, Role, str, str, int]
"""A turn as (round, role, speaker, phase, attempt): a `TurnRecord.key`."""
TURNS = "turns"
"""The stage group of a round's speaking turns (the plan announces them together)."""
JUDGING = "judging"
"""The stage group of a round's judging turns."""

RecordT = TypeVar("RecordT", bound=RoundRecordBase)


class UnknownRecordError(EngineError):
    """A round record reached a protocol's view that does not render it."""


def expect(record: RoundRecordBase, kind: type[RecordT], protocol: str) -> RecordT:
    """`record` as the type a protocol's view renders; a clear error otherwise, never a guess."""
    if not isinstance(record, kind):
        raise UnknownRecordError(
            f"the {protocol} protocol's view renders {kind.__name__} records; got"
            f" {type(record).__name__} (kind {record.kind!r})"
        )
    return record


def count(parsed: dict[str, Any], name: str) -> int:
    """How many items a turn's list (or object) field holds; 0 when it has none."""
    value = parsed.get(name)
    return len(value) if isinstance(value, list | dict) else 0


def plural(number: int, word: str, words: str = "") -> str:
    return f"{number} {word if number == 1 else words or word + 's'}"


def round_where(spec: DebateSpec, number: int) -> str:
    """Where a debate of rounds stands, for the live "who is speaking" line."""
    return f"round {number} of {spec.max_rounds}" if number >= 1 else "before the first round"


def speaking(event: TurnStarted) -> str:
    """A debater speaking, as the live line says it (the step the engine reported)."""
    return f"{event.speaker or 'a debater'} is {event.step or 'speaking'}"


class ProtocolView(ABC):
    """How a protocol's debates read: each round record, and its own part of the verdict."""

    @abstractmethod
    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        """One round (or phase) record; `max_rounds` is the spec's, for records that do not
        carry it. A record of another protocol is an `UnknownRecordError` (`expect`)."""

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        """The protocol's own outcome under the verdict (its report); none by default, and none
        for a run that ended before an outcome."""
        return ()


class PlanTasks:
    """A protocol's part of the live plan and of the parent's "who is speaking" line. The
    defaults suit a protocol of rounds of debaters; a protocol overrides what it does
    differently."""

    phased = False
    """Whether a round's phases are stages of their own (the plan announces each phase's turns
    when the phase starts)."""

    def expected(self, spec: DebateSpec, number: int, phase: str, group: str) -> list[TurnKey]:
        """The turns a stage will hold as far as the spec tells, in the order they run; turns
        the spec cannot foresee (a turn asked again, a judge) appear when they start."""
        if group != TURNS:
            return []
        return [(number, Role.DEBATER, d.name or "", phase, 1) for d in spec.debaters()]

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        """A task's title, from the turn's identity alone (the same live and from the record)."""
        number, role, speaker, _phase, _attempt = key
        return ROLE_TITLES.get(role) or f"Round {number}: {speaker or role.value}"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        """What a finished turn said, in one line of counts and choices (no model prose)."""
        if turn.role is Role.SYNTHESIZER:
            return "synthesizer: the answer is written"
        return f"{turn.speaker or turn.role.value}: done"

    def progress(self, event: TurnStarted, spec: DebateSpec) -> str:
        """The live "who is speaking" line of a turn that starts."""
        doing = ROLE_DOING.get(event.role) or speaking(event)
        return f"{doing} \u00b7 {round_where(spec, event.round)}"


ROLE_TITLES = {
    Role.JUDGE: "Judge weighs the debate",
    Role.ROUTER: "The fast model answers first",
    Role.SYNTHESIZER: "Synthesizer writes the answer in the requested shape",
}
"""The plan's titles of the roles any protocol may use the same way."""
ROLE_DOING = {
    Role.JUDGE: "judge is scoring the arguments",
    Role.ROUTER: "the fast model is answering first",
    Role.SYNTHESIZER: "synthesizer is writing the answer in the requested shape",
}
"""The live line of the roles any protocol may use the same way."""


@dataclass(frozen=True)
class Flags:
    """What a protocol takes and offers beyond the common spec."""

    takes_stances: bool = False
    """Debaters are given stances with `--for` and `--against`."""
    takes_route: bool = False
    """`--route`: a fast model answers first and may make the debate unnecessary."""
    another_round: bool = False
    """A reviewer may ask for *Another round*: the debate continues with one round more."""
    configured_rounds: bool = False
    """The channel's or deployment's round count applies (others end by their own rule)."""


@dataclass(frozen=True)
class DefaultDebater:
    """A debater a protocol gets when the request names none."""

    name: str
    stance: str | None = None
    hint: str | None = None


@dataclass(frozen=True)
class Labels:
    """How people meet a protocol: its name in texts, and what help texts say of it."""

    display_name: str
    description: str
    """One line: what the protocol does."""
    advice: str
    """One line: which question it suits."""


@dataclass(frozen=True)
class Confidence:
    """What the confidence components mean for this protocol (`evidence` measures them)."""

    unanswered: str
    """What counts as left unanswered."""
    declared: str
    """Whose level is the declared one."""


@dataclass(frozen=True)
class ProtocolDefinition:
    """One protocol, declared once: its engine, rounds, options, flags, labels, plan, view and
    the meaning of its confidence components."""

    name: str
    engine: Callable[[], DebateProtocol]
    default_rounds: int
    max_rounds: int
    """The hard maximum of rounds: every round's calls resend the case and a compact record of
    the rounds before, so cost and time grow with every round, and one request must not hold a
    worker for hours."""
    labels: Labels
    view: ProtocolView
    confidence: Confidence
    plan: PlanTasks = field(default_factory=PlanTasks)
    options: type[BaseModel] | None = None
    """The options model `spec.options` is validated against (`--option key=value`)."""
    flags: Flags = Flags()
    deciding_slot: str = "debaters"
    """The role slot (`bot.settings.ROLE_SLOTS`) whose model decides the debates; an
    independent judge runs on another family's model than it when it can."""
    default_debaters: tuple[DefaultDebater, ...] = ()
    calls_per_run: int = 6
    """Model calls one run typically makes with its defaults (the eval's spend estimate)."""
