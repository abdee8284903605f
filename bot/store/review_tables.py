"""The tables of people's judgement of a verdict: review requests (`escalation`), the
decisions on them (`review`) and readers' thumbs (`feedback`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import utcnow


class EscalationState(StrEnum):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    ANOTHER_ROUND = "another_round"
    EXPIRED = "expired"
    """Open past the channel's review SLA; a reviewer may still decide it."""


class Escalation(WorkspaceOwned, table=True):
    """A review request for one debate; `reviewers` is the snapshot the request mentioned."""

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", unique=True)
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    reviewers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    message_ts: str | None = Field(default=None, max_length=40)
    state: EscalationState = Field(
        default=EscalationState.OPEN,
        sa_column=enum_column(EscalationState, name="ck_escalation_state", length=20),
    )
    sample: bool = Field(default=False)
    """The verdict did not escalate; it was drawn at random for review, so the calibration's
    labels are not all from verdicts already doubted (schema 0016)."""
    created_at: datetime = Field(default_factory=utcnow)


class Review(WorkspaceOwned, table=True):
    """A human decision on an escalation; one per escalation, so double clicks change nothing."""

    id: int | None = Field(default=None, primary_key=True)
    escalation_id: int = Field(foreign_key="escalation.id", unique=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    reviewer: str = Field(max_length=80)
    decision: EscalationState = Field(
        sa_column=enum_column(EscalationState, name="ck_review_decision", length=20)
    )
    note: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)


class FeedbackValue(StrEnum):
    POSITIVE = "positive"
    NEGATIVE = "negative"


class Feedback(WorkspaceOwned, table=True):
    """One person's thumbs up or down on a debate's verdict; a changed mind overwrites it."""

    __table_args__ = (UniqueConstraint("debate_id", "user_id", name="uq_feedback_person"),)

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    user_id: str = Field(max_length=40)
    value: FeedbackValue = Field(
        sa_column=enum_column(FeedbackValue, name="ck_feedback_value", length=10)
    )
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
