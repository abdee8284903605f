"""Typed events the runner emits as a debate runs; the CLI, the store and the bot consume them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from engine.models import AdversarialRound, DebateResult, Role, TurnRecord, utcnow


class TurnStarted(BaseModel):
    kind: Literal["turn_started"] = "turn_started"
    round: int
    role: Role
    speaker: str = ""
    attempt: int
    provider: str
    model: str
    at: datetime = Field(default_factory=utcnow)


class TurnFinished(BaseModel):
    """A turn is done; `replayed` is true when it came from the stored record, not a model."""

    kind: Literal["turn_finished"] = "turn_finished"
    turn: TurnRecord
    replayed: bool = False


class RoundFinished(BaseModel):
    kind: Literal["round_finished"] = "round_finished"
    record: AdversarialRound


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


DebateEvent = Annotated[
    TurnStarted | TurnFinished | RoundFinished | VerdictReached | DebateTruncated | DebateFailed,
    Field(discriminator="kind"),
]
EventSink = Callable[[DebateEvent], Awaitable[None]]


async def discard_events(event: DebateEvent) -> None:
    """The sink for callers that only want the returned result."""
