"""SQLModel tables of the audit store. Alembic (`migrations/`) owns the schema built from these.

Timestamps are timezone-aware UTC (SQLModel's `UTCDateTime` refuses naive ones), so the turn hash
chain recomputes identically on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from engine.models import utcnow


class DebateState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


class Debate(SQLModel, table=True):
    """One requested debate and its job state; `trigger_key` makes a request idempotent."""

    id: int | None = Field(default=None, primary_key=True)
    trigger_key: str = Field(max_length=255, unique=True)
    source: str = Field(max_length=40)
    channel_id: str | None = Field(default=None, max_length=40, index=True)
    thread_ts: str | None = Field(default=None, max_length=40)
    requested_by: str | None = Field(default=None, max_length=80)
    parent_debate_id: int | None = Field(default=None, foreign_key="debate.id")
    question: str = Field(sa_column=Column(Text, nullable=False))
    protocol: str = Field(max_length=40)
    spec_json: str = Field(sa_column=Column(Text, nullable=False))
    state: str = Field(default=DebateState.QUEUED.value, max_length=20, index=True)
    lease_owner: str | None = Field(default=None, max_length=120)
    lease_expires_at: datetime | None = Field(default=None, index=True)
    claims: int = Field(default=0)
    outcome: str | None = Field(default=None, max_length=20)
    decision: str | None = Field(default=None, max_length=40)
    confidence: float | None = None
    cost_usd: float = Field(default=0.0)
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class Turn(SQLModel, table=True):
    """One agent output. Append-only; `hash` chains it to the previous turn of its debate."""

    __table_args__ = (
        UniqueConstraint("debate_id", "round", "role", "speaker", "attempt", name="uq_turn_key"),
        UniqueConstraint("debate_id", "seq", name="uq_turn_seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    seq: int
    round: int
    role: str = Field(max_length=40)
    speaker: str = Field(default="", max_length=60)
    attempt: int
    provider: str = Field(max_length=80)
    model: str = Field(max_length=200)
    prompt_sha256: str = Field(max_length=64)
    request_sha256: str = Field(max_length=64)
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int = 0
    cost_usd: float
    latency_s: float
    reasks: int
    raw_text: str = Field(sa_column=Column(Text, nullable=False))
    parsed_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class VerdictRecord(SQLModel, table=True):
    """The final verdict of a debate and the whole result document it came from."""

    __tablename__ = "verdict"

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", unique=True)
    status: str = Field(max_length=20)
    decision: str = Field(max_length=40)
    confidence: float
    level: str = Field(max_length=20)
    escalate: bool
    synthesis: str = Field(sa_column=Column(Text, nullable=False))
    result_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class EscalationState(StrEnum):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    ANOTHER_ROUND = "another_round"


class Escalation(SQLModel, table=True):
    """A review request for one debate; `reviewers` is the snapshot the request mentioned."""

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", unique=True)
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    reviewers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    message_ts: str | None = Field(default=None, max_length=40)
    state: str = Field(default="open", max_length=20)
    created_at: datetime = Field(default_factory=utcnow)


class Review(SQLModel, table=True):
    """A human decision on an escalation; one per escalation, so double clicks change nothing."""

    id: int | None = Field(default=None, primary_key=True)
    escalation_id: int = Field(foreign_key="escalation.id", unique=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    reviewer: str = Field(max_length=80)
    decision: str = Field(max_length=20)
    note: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)


class ChannelSettings(SQLModel, table=True):
    __tablename__ = "channel_settings"

    channel_id: str = Field(primary_key=True, max_length=40)
    protocol: str = Field(default="adversarial", max_length=40)
    rounds: int = Field(default=1)
    threshold: float = Field(default=0.6)
    reviewers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    owners: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    budget_usd: float | None = None
    adr_watch: bool = Field(default=False)
    trigger_reaction: str = Field(default="scales", max_length=80)
    updated_by: str | None = Field(default=None, max_length=80)
    updated_at: datetime = Field(default_factory=utcnow)


class SlackPost(SQLModel, table=True):
    """One bot message a debate owns (parent, a round, the verdict), so none is posted twice.

    The row is reserved (ts empty) before posting and completed with the message ts after; a
    resumed debate finds the ts and updates or skips instead of posting again.
    """

    __tablename__ = "slack_post"
    __table_args__ = (UniqueConstraint("debate_id", "key", name="uq_slack_post_key"),)

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    key: str = Field(max_length=80)
    channel_id: str = Field(max_length=40)
    ts: str | None = Field(default=None, max_length=40)
    reserved_by: str = Field(max_length=120)
    reserved_at: datetime = Field(default_factory=utcnow)
    posted_at: datetime | None = None


class ProcessedTrigger(SQLModel, table=True):
    """Slack event ids and other trigger keys already handled, so retries are ignored."""

    __tablename__ = "processed_trigger"

    key: str = Field(primary_key=True, max_length=255)
    debate_id: int | None = Field(default=None, foreign_key="debate.id")
    created_at: datetime = Field(default_factory=utcnow)
