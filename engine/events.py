"""Typed events the runner emits as a debate runs; the CLI, the store and the bot consume them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SerializeAsAny

from engine.models import DebateResult, Role, RoundRecordBase, TurnRecord, utcnow


class TurnStarted(BaseModel):
    kind: Literal["turn_started"] = "turn_started"
    round: int
    role: Role
    speaker: str = ""
    step: str = ""
    """What the turn is for, when the role alone does not say (a consensus or structured phase)."""
    phase: str = ""
    """The turn's `phase` as its `TurnRecord` will carry it, so a follower can pair the start
    of a turn with its end (a consensus phase, a part of the structured judge's answer)."""
    attempt: int
    provider: str
    model: str
    at: datetime = Field(default_factory=utcnow)


class TurnStreaming(BaseModel):
    """A turn is being written: the readable part of its reply so far (`text`, prose from the
    partial JSON, never JSON itself), or, with `reasked`, the reply just streamed failed
    validation and is being asked again (what was shown does not count). Nothing of it is
    stored; the turn's `TurnFinished` holds what counts."""

    kind: Literal["turn_streaming"] = "turn_streaming"
    round: int
    role: Role
    speaker: str = ""
    phase: str = ""
    attempt: int
    text: str = ""
    reasked: bool = False

    @property
    def key(self) -> tuple[int, Role, str, str, int]:
        return (self.round, self.role, self.speaker, self.phase, self.attempt)


class TurnFinished(BaseModel):
    """A turn is done; `replayed` is true when it came from the stored record, not a model."""

    kind: Literal["turn_finished"] = "turn_finished"
    turn: TurnRecord
    replayed: bool = False


class RoundFinished(BaseModel):
    """A round (or, for consensus and structured debates, a phase) is over; posted once. The
    record is the protocol's own type (`engine.rounds`, or a protocol's module)."""

    kind: Literal["round_finished"] = "round_finished"
    record: SerializeAsAny[RoundRecordBase]


class VerdictReached(BaseModel):
    kind: Literal["verdict"] = "verdict"
    result: DebateResult


class DebateTruncated(BaseModel):
    kind: Literal["truncated"] = "truncated"
    reason: str
    result: DebateResult


class DebateFailed(BaseModel):
    kind: Literal["failed"] = "failed"
    error: str
    result: DebateResult


class DebateCancelled(BaseModel):
    """A person stopped the debate: `result` holds what was said until then."""

    kind: Literal["cancelled"] = "cancelled"
    reason: str
    result: DebateResult


DebateEvent = Annotated[
    TurnStarted
    | TurnStreaming
    | TurnFinished
    | RoundFinished
    | VerdictReached
    | DebateTruncated
    | DebateFailed
    | DebateCancelled,
    Field(discriminator="kind"),
]
EventSink = Callable[[DebateEvent], Awaitable[None]]


async def discard_events(event: DebateEvent) -> None:
    """The sink for callers that only want the returned result."""
