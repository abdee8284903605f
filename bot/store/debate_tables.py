"""The tables of a debate's record: the debate with its job state (`debate`), its turns,
hash-chained (`turn`), and its verdict (`verdict`), with the states they hold."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import ConfidenceLevel, DebateStatus, Decision, utcnow


class DebateState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


class CancelSource(StrEnum):
    """Where a person stopped a debate from (issue 44)."""

    SLACK_STOP = "slack_stop"
    """Slack's Stop button of the debate's agent session, or the Stop button on its message."""
    COMMAND = "command"
    """`/debate cancel <id>`."""
    CLI = "cli"
    """`debatebot debates cancel`."""
    TERMINAL = "terminal"
    """Ctrl-C in `debatebot run`."""
    WEB = "web"
    MCP = "mcp"
    """`cancel_debate`, a coding agent over MCP."""


class DebateSource(StrEnum):
    """What asked for a debate."""

    COMMAND = "command"
    MODAL = "modal"
    ADR = "adr"
    UPLOAD = "upload"
    LINK = "link"
    REACTION = "reaction"
    SHORTCUT = "shortcut"
    ANOTHER_ROUND = "another_round"
    DEBATE_ANYWAY = "debate_anyway"
    ASSISTANT = "assistant"
    CLI = "cli"
    WEB = "web"
    API = "api"
    MCP = "mcp"


class TriageState(StrEnum):
    PENDING = "pending"
    """One cheap call decides first whether to debate at all."""
    DEBATE = "debate"
    ANSWERED = "answered"
    """The single answer was posted with a Debate anyway button."""


class Debate(WorkspaceOwned, table=True):
    """One requested debate and its job state; `trigger_key` makes a request idempotent."""

    __table_args__ = (
        UniqueConstraint("team_id", "trigger_key", name="uq_debate_team_trigger_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    trigger_key: str = Field(max_length=255)
    """What asked for it (`thread:<channel>:<ts>`, `command:<trigger id>`), unique in its
    workspace: Slack's ids are not unique across workspaces (a channel shared by two workspaces
    has one id and one ts in both, and each may debate it)."""
    source: DebateSource = Field(
        sa_column=enum_column(DebateSource, name="ck_debate_source", length=40)
    )
    channel_id: str | None = Field(default=None, max_length=40, index=True)
    thread_ts: str | None = Field(default=None, max_length=40)
    requested_by: str | None = Field(default=None, max_length=80)
    parent_debate_id: int | None = Field(default=None, foreign_key="debate.id")
    question: str = Field(sa_column=Column(Text, nullable=False))
    protocol: str = Field(max_length=40)
    spec_json: str = Field(sa_column=Column(Text, nullable=False))
    state: DebateState = Field(
        default=DebateState.QUEUED,
        sa_column=enum_column(DebateState, name="ck_debate_state", length=20, index=True),
    )
    lease_owner: str | None = Field(default=None, max_length=120)
    lease_expires_at: datetime | None = Field(default=None, index=True)
    claims: int = Field(default=0)
    outcome: DebateStatus | None = Field(
        default=None,
        sa_column=enum_column(DebateStatus, name="ck_debate_outcome", length=20, nullable=True),
    )
    decision: Decision | None = Field(
        default=None,
        sa_column=enum_column(Decision, name="ck_debate_decision", length=40, nullable=True),
    )
    confidence: float | None = None
    cost_usd: float = Field(default=0.0)
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    halt_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """Set when the debate's Slack thread became unreachable: its worker stops at the next turn
    instead of spending on a debate nobody can read."""
    suspended_at: datetime | None = None
    """When the app was uninstalled from the debate's workspace (or its bot token revoked): no
    worker claims it, its worker stops at the next turn and hands it back, and installing the
    app again clears this, so it resumes (bot.store.workspaces)."""
    cancel_requested_at: datetime | None = None
    """When a person asked to stop the debate (None: nobody did). Whatever worker holds it
    sees the request within `DEBATEBOT_CANCEL_POLL_S` and abandons the call in flight; a queued
    one, or one no worker holds, is ended at its next claim without a model call. The three
    cancel columns are sealed with the ending (bot.store.audit)."""
    cancelled_by: str | None = Field(default=None, max_length=80)
    cancelled_from: CancelSource | None = Field(
        default=None,
        sa_column=enum_column(
            CancelSource, name="ck_debate_cancelled_from", length=20, nullable=True
        ),
    )
    chain_head: str | None = Field(default=None, max_length=64)
    chain_turns: int | None = None
    triage: TriageState | None = Field(
        default=None,
        sa_column=enum_column(TriageState, name="ck_debate_triage", length=20, nullable=True),
    )
    triage_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    review_channel_id: str | None = Field(default=None, max_length=40)
    """Where the review request goes when not in the debate's thread (an assistant thread's
    debate escalates to a channel)."""
    reviewers_channel_id: str | None = Field(default=None, max_length=40)
    """The channel whose reviewers decide the review, chosen by the server when the debate is
    queued: the debate's own channel, or for a debate in a DM the deployment's review channel
    (DEBATEBOT_REVIEW_CHANNEL). Never the channel a requester names with `--review-in`, which
    only says where the request is posted. None: workspace admins decide."""
    link: str | None = Field(default=None, max_length=500)
    """The GitHub or GitLab link the ADR came from (its pull request gets the verdict)."""
    pr_comment_due: datetime | None = Field(default=None, index=True)
    """When the pull request's verdict comment last fell behind (the ending, a review), written
    in the same transaction; cleared once the comment is synced or none is wanted. The
    `pr-comments` job retries what a host refused."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class Turn(WorkspaceOwned, table=True):
    """One agent output. Append-only; `hash` chains it to the previous turn of its debate."""

    __table_args__ = (
        UniqueConstraint(
            "debate_id", "round", "role", "speaker", "phase", "attempt", name="uq_turn_key"
        ),
        UniqueConstraint("debate_id", "seq", name="uq_turn_seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    seq: int
    round: int
    role: str = Field(max_length=40)
    speaker: str = Field(default="", max_length=60)
    phase: str = Field(default="", max_length=40)
    attempt: int
    provider: str = Field(max_length=80)
    model: str = Field(max_length=200)
    prompt_sha256: str = Field(max_length=64)
    request_sha256: str = Field(max_length=64)
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int = 0
    reasoning_tokens: int = 0
    """Of the output tokens, those spent thinking (schema 0013)."""
    cost_usd: float
    latency_s: float
    reasks: int
    raw_text: str = Field(sa_column=Column(Text, nullable=False))
    parsed_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class VerdictRecord(WorkspaceOwned, table=True):
    """The final verdict of a debate and the whole result document it came from."""

    __tablename__ = "verdict"

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", unique=True)
    status: DebateStatus = Field(
        sa_column=enum_column(DebateStatus, name="ck_verdict_status", length=20)
    )
    decision: Decision = Field(
        sa_column=enum_column(Decision, name="ck_verdict_decision", length=40)
    )
    confidence: float
    level: ConfidenceLevel = Field(
        sa_column=enum_column(ConfidenceLevel, name="ck_verdict_level", length=20)
    )
    escalate: bool
    synthesis: str = Field(sa_column=Column(Text, nullable=False))
    result_json: str = Field(sa_column=Column(Text, nullable=False))
    weights_version: str | None = Field(default=None, max_length=40, index=True)
    """The version of the confidence weights that scored it (schema 0019; None before)."""
    components_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """Its confidence components (`engine.confidence.ConfidenceComponents` as JSON), kept apart
    from the result document so calibration reads them without it (schema 0019)."""
    chain_turns: int | None = None
    chain_tail: str | None = Field(default=None, max_length=64)
    chain_head: str | None = Field(default=None, max_length=64)
    """The verdict hashed onto the turn chain at finish (see bot.store.audit)."""
    chain_signature: str | None = Field(default=None, max_length=64)
    chain_version: int = 1
    """How the head was made: 2 covers the debate's question, spec and ending too, 1 (before
    schema 0011) only the turns and the verdict, 0 marks a debate that finished before seals."""
    chain_debate: str | None = Field(default=None, max_length=64)
    """The digest of the debate row's sealed content (version 2)."""
    created_at: datetime = Field(default_factory=utcnow)
