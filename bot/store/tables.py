"""SQLModel tables of the audit store. Alembic (`migrations/`) owns the schema built from these.

Timestamps are timezone-aware UTC (SQLModel's `UTCDateTime` refuses naive ones), so the turn hash
chain recomputes identically on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlalchemy import Enum as SqlEnum
from sqlmodel import Field, SQLModel

from engine.calibration.labels import LabelKind
from engine.models import DEFAULT_PROTOCOL, ConfidenceLevel, DebateStatus, Decision, utcnow


def enum_column(
    enum: type[StrEnum],
    *,
    name: str,
    length: int,
    nullable: bool = False,
    index: bool = False,
    default: StrEnum | None = None,
) -> Column[Any]:
    """A column holding one of `enum`'s values as a string (not a database enum type, so a new
    value needs no type migration), with a CHECK constraint `name` that refuses any other."""
    kind = SqlEnum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=length,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )
    return Column(kind, nullable=nullable, index=index, default=default)


class WorkspaceOwned(SQLModel):
    """The columns of a row that belongs to one Slack workspace (issue 37): its team and, on
    Enterprise Grid, its org. The store stamps them and filters every read and write by them
    (bot.store.tenancy); a row is never read into another workspace's answer."""

    team_id: str | None = Field(default=None, max_length=40, index=True, nullable=False)
    """Slack's team id of the workspace (None only until the store stamps it)."""
    enterprise_id: str | None = Field(default=None, max_length=40)


class DebateState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


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
    """The version of the confidence weights that scored it (schema 0017; None before)."""
    components_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """Its confidence components (`engine.confidence.ConfidenceComponents` as JSON), kept apart
    from the result document so calibration reads them without it (schema 0017)."""
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


class CalibrationLabel(WorkspaceOwned, table=True):
    """One verdict labelled right or wrong (a review, an eval run, a reader's thumbs), with the
    confidence it had and what that confidence was made of, copied when the label was made, so
    a label outlives its debate's retention."""

    __tablename__ = "calibration_label"
    __table_args__ = (UniqueConstraint("team_id", "key", name="uq_calibration_label_team_key"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=255)
    """Where the label comes from, so it is made once in its workspace: `review:<escalation
    id>`, `feedback:<debate id>:<user id>`, `eval:<run>:<case>:<arm>:<variant>` (one eval run
    may be imported into several workspaces)."""
    kind: LabelKind = Field(
        sa_column=enum_column(LabelKind, name="ck_calibration_label_kind", length=20, index=True)
    )
    debate_id: int | None = Field(default=None, foreign_key="debate.id", index=True)
    task_type: str = Field(max_length=80)
    protocol: str = Field(max_length=40)
    correct: bool
    confidence: float
    components: dict[str, float | None] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    weights_version: str | None = Field(default=None, max_length=40)
    sampled: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class WeightsVersion(SQLModel, table=True):
    """One version of the confidence weights, proposed by a fit; adopting it is a
    `WeightsAdoption`."""

    __tablename__ = "confidence_weights"

    version: str = Field(primary_key=True, max_length=40)
    weights_json: str = Field(sa_column=Column(Text, nullable=False))
    """The `engine.confidence.ConfidenceWeights`, as JSON."""
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """What the fit was checked on: labels, the held-out Brier scores, the weights it beat."""
    proposed_at: datetime = Field(default_factory=utcnow)


class WeightsAdoption(WorkspaceOwned, table=True):
    """An admin adopting a weights version; the newest adoption's version scores new
    verdicts."""

    __tablename__ = "weights_adoption"

    id: int | None = Field(default=None, primary_key=True)
    version: str = Field(foreign_key="confidence_weights.version", max_length=40, index=True)
    adopted_by: str = Field(max_length=80)
    adopted_at: datetime = Field(default_factory=utcnow)


class ChannelSettings(WorkspaceOwned, table=True):
    __tablename__ = "channel_settings"

    team_id: str | None = Field(default=None, primary_key=True, max_length=40)
    """A channel's settings are its workspace's: a Slack Connect channel shared by two
    workspaces that both installed the app has one id and two sets of settings."""
    channel_id: str = Field(primary_key=True, max_length=40)
    protocol: str = Field(default=DEFAULT_PROTOCOL, max_length=40)
    rounds: int | None = None
    """Adversarial rounds; None: the deployment's DEBATEBOT_ROUNDS."""
    threshold: float | None = None
    """Confidence below which verdicts go to the reviewers; None: the deployment's
    DEBATEBOT_ESCALATION_THRESHOLD."""
    reviewers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    owners: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    budget_usd: float | None = None
    adr_watch: bool = Field(default=False)
    trigger_reaction: str = Field(default="scales", max_length=80)
    triage: bool = Field(default=False)
    """ADR posts and review reactions ask one cheap call first whether a debate is warranted."""
    route: bool = Field(default=False)
    """Panel debates let a fast model answer first and skip the panel when it is sure."""
    monthly_budget_usd: float | None = None
    """This channel's spending cap per calendar month (UTC); None: only the workspace's."""
    review_sla_h: float | None = None
    """Hours a review may stay open before it expires; None: the deployment's default."""
    digest_time: str | None = Field(default=None, max_length=5)
    """`HH:MM` local time of the daily digest; None: no digest (opt-in)."""
    timezone: str = Field(default="UTC", max_length=64)
    """IANA name of the channel's time zone, for the digest."""
    pr_comment: bool = Field(default=False)
    """Post the verdict on a linked pull (merge) request as one comment, updated by reviews."""
    adr_pattern: str | None = Field(default=None, max_length=200)
    """A regular expression the first line of this channel's own ADR titles matches (`RFC-\\d+`),
    beside the formats `bot.adr` knows."""
    updated_by: str | None = Field(default=None, max_length=80)
    updated_at: datetime = Field(default_factory=utcnow)


class OutboxAction(StrEnum):
    POST = "post"
    UPDATE = "update"
    """Replace the content of the message `target_key` names."""
    STREAM = "stream"
    """The debate's live plan, streamed into its thread (`chat.startStream`, `appendStream`,
    `stopStream`); its content is the whole plan as it stands, coalesced like an update."""


class OutboxTarget(StrEnum):
    THREAD = "thread"
    """The debate's thread."""
    CHANNEL = "channel"
    """Top level of `channel_id`."""
    DM = "dm"
    """A direct message to each of `recipients`."""


class OutboxFallback(StrEnum):
    NONE = "none"
    REVIEWERS = "reviewers"
    """When the thread cannot be reached, DM the reviewers, then the requester, then the
    workspace admins."""


class OutboxState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    SPLIT = "split"
    """Refused by Slack for its size and replaced by smaller parts (rows of their own)."""


class StreamState(StrEnum):
    """Where a stream row's message stands in Slack (None: not started yet)."""

    STARTING = "starting"
    """`chat.startStream` was sent and no answer recorded: Slack may have started it (the
    process died, the answer was lost), so the next try looks for it before starting one."""
    OPEN = "open"
    """Streaming: each new version is appended (`chat.appendStream`), the last stops it."""
    MESSAGE = "message"
    """The stream could not be continued (Slack closed it, it was deleted, a method was
    refused): its content is a normal message now, changed by `chat.update`."""
    CLOSED = "closed"
    """Stopped with its final version (or that version shown as the normal message)."""
    REFUSED = "refused"
    """Slack would not start it (no streaming in this workspace, a method refused): the
    parent's live status shows the debate's progress instead."""


class Outbox(WorkspaceOwned, table=True):
    """One message owed to people, written in the transaction of the state that creates it and
    delivered by `bot.jobs.delivery`, which retries until Slack takes it or its deadline passes:
    what a debate owes (parent, status, round, verdict, review request, reminder, notice), or,
    with no debate, what a channel is owed (the daily digest).

    Posts of one debate (or, without one, of one channel) go out in `(seq, part, id)` order; an
    update (`action="update"`) replaces the content of the message `target_key` names and is
    coalesced: a newer status replaces a pending one and bumps `version`. `deliveries` holds
    `[channel, ts]` of every copy Slack took, so nothing is posted twice and a resumed run
    updates instead of reposting. A key is owed once per debate, or once per channel for
    channel messages (`digest:C1:2026-11-25`).

    A debate's live plan is one row too (`action="stream"`): its content is the whole plan,
    replaced by each newer version like an update; `streamed` is what Slack has of it and
    `stream_state` where its message stands, so each delivery sends only what changed.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("debate_id", "key", name="uq_outbox_key"),
        UniqueConstraint("team_id", "channel_key", name="uq_outbox_channel_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int | None = Field(default=None, foreign_key="debate.id", index=True)
    key: str = Field(max_length=120)
    channel_key: str | None = Field(default=None, max_length=170)
    """`channel_id:key` of a channel's own message (no debate), so it is owed once in its
    workspace; None for a
    debate's, which (debate_id, key) keeps unique (a unique column takes many NULLs, where a
    unique pair with a NULL debate would not hold)."""
    seq: int = Field(default=0)
    part: int = Field(default=0)
    action: OutboxAction = Field(
        default=OutboxAction.POST,
        sa_column=enum_column(OutboxAction, name="ck_outbox_action", length=10),
    )
    target: OutboxTarget = Field(
        default=OutboxTarget.THREAD,
        sa_column=enum_column(OutboxTarget, name="ck_outbox_target", length=10),
    )
    target_key: str | None = Field(default=None, max_length=120)
    recipients: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    fallback: OutboxFallback = Field(
        default=OutboxFallback.NONE,
        sa_column=enum_column(OutboxFallback, name="ck_outbox_fallback", length=20),
    )
    channel_id: str = Field(max_length=40)
    text: str = Field(sa_column=Column(Text, nullable=False))
    blocks: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    state: OutboxState = Field(
        default=OutboxState.PENDING,
        sa_column=enum_column(OutboxState, name="ck_outbox_state", length=20, index=True),
    )
    version: int = Field(default=1)
    attempts: int = Field(default=0)
    next_attempt_at: datetime = Field(default_factory=utcnow)
    deadline_at: datetime
    claimed_by: str | None = Field(default=None, max_length=120)
    claimed_until: datetime | None = None
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    deliveries: list[list[str]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    delivered_to: str | None = Field(default=None, max_length=400)
    created_at: datetime = Field(default_factory=utcnow)
    sent_at: datetime | None = None
    stream_state: StreamState | None = Field(
        default=None,
        sa_column=enum_column(StreamState, name="ck_outbox_stream_state", length=20, nullable=True),
    )
    """A stream row's message in Slack (None for every other row, and before it starts)."""
    streamed: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False, server_default="[]")
    )
    """A stream row's chunks as Slack has taken them, so the next version sends only what
    changed and a resumed delivery continues the same stream."""
    stream_thread_ts: str | None = Field(default=None, max_length=40)
    """The thread a stream row's message is in: when the debate's thread moves (its parent was
    deleted), the plan moves with it."""

    @property
    def ts(self) -> str | None:
        """The ts of the (first) copy Slack took, if any."""
        return self.deliveries[0][1] if self.deliveries else None


class ProcessedTrigger(WorkspaceOwned, table=True):
    """Slack event ids and other trigger keys already handled, so retries are ignored; a key is
    its workspace's (`greeted:<user id>`, a double click's window), as Slack's ids other than
    event ids are not unique across workspaces (bot.store.dedupe)."""

    __tablename__ = "processed_trigger"

    team_id: str | None = Field(default=None, primary_key=True, max_length=40)
    key: str = Field(primary_key=True, max_length=255, index=True)
    """Indexed alone too: a Slack event id is looked up across workspaces."""
    debate_id: int | None = Field(default=None, foreign_key="debate.id")
    created_at: datetime = Field(default_factory=utcnow)


class RunOutcome(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class ScheduledRun(SQLModel, table=True):
    """One run of a scheduled job per slot (its aligned fire time): the row makes a job fire
    once per slot across replicas, and tells operators when each job last ran and how."""

    __tablename__ = "scheduled_run"

    job: str = Field(primary_key=True, max_length=40)
    slot: str = Field(primary_key=True, max_length=40)
    runner: str = Field(max_length=120)
    outcome: RunOutcome = Field(
        default=RunOutcome.RUNNING,
        sa_column=enum_column(RunOutcome, name="ck_scheduled_run_outcome", length=20),
    )
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class SlackBot(SQLModel, table=True):
    """The bot of one OAuth install: of a workspace, or of an Enterprise Grid org installed
    org-wide (no team). Installing again replaces it; token rotation rewrites its tokens. The
    tokens are sealed (bot.store.cipher), bound to this row's `installation` key."""

    __tablename__ = "slack_bot"

    installation: str = Field(primary_key=True, max_length=90)
    """`enterprise:team`, `-` for what there is none of (bot.store.installations.key)."""
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    is_enterprise_install: bool = Field(default=False)
    app_id: str | None = Field(default=None, max_length=40)
    enterprise_name: str | None = Field(default=None, max_length=200)
    team_name: str | None = Field(default=None, max_length=200)
    bot_id: str | None = Field(default=None, max_length=40)
    bot_user_id: str | None = Field(default=None, max_length=40)
    bot_scopes: str = Field(default="", sa_column=Column(Text, nullable=False))
    bot_token_enc: str = Field(sa_column=Column(Text, nullable=False))
    bot_refresh_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    bot_token_expires_at: datetime | None = None
    """When the bot token expires (token rotation on); None: it does not."""
    installed_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    refused_code: str | None = Field(default=None, max_length=60)
    """Slack refuses this bot token (`invalid_auth`, `account_inactive`, …) though no uninstall
    was heard of: no replica claims the workspace's debates or sends what it is owed until
    `auth.test` takes the token again or the app is installed again, which clears this
    (bot.store.refusals). None: the token is taken."""
    refused_scope: str | None = Field(default=None, max_length=200)
    """With `missing_scope`: the scope Slack named as needed."""
    refused_since: datetime | None = None
    probe_at: datetime | None = None
    """When a replica next asks Slack (`auth.test`) whether it takes the token."""
    probe_wait_s: float | None = None
    """The wait before the probe after that one (doubling up to a cap). Kept when a probe finds
    the token taken (`refused_code` None), until a delivery to the workspace proves it: a
    refusal meanwhile resumes from it (bot.store.refusals)."""


class SlackInstallation(SQLModel, table=True):
    """One person's install of the app in a workspace or org: who installed it and when, with
    their user token when the app asks for user scopes (sealed like the bot's). Installing again
    updates the person's row; the bot's token is in `slack_bot`."""

    __tablename__ = "slack_installation"
    __table_args__ = (
        UniqueConstraint("installation", "user_id", name="uq_slack_installation_user"),
    )

    id: int | None = Field(default=None, primary_key=True)
    installation: str = Field(max_length=90, index=True)
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    is_enterprise_install: bool = Field(default=False)
    app_id: str | None = Field(default=None, max_length=40)
    enterprise_name: str | None = Field(default=None, max_length=200)
    enterprise_url: str | None = Field(default=None, max_length=400)
    team_name: str | None = Field(default=None, max_length=200)
    user_id: str = Field(max_length=40)
    user_scopes: str = Field(default="", sa_column=Column(Text, nullable=False))
    user_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    user_refresh_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    user_token_expires_at: datetime | None = None
    incoming_webhook_url_enc: str | None = Field(
        default=None, sa_column=Column(Text, nullable=True)
    )
    incoming_webhook_channel: str | None = Field(default=None, max_length=200)
    incoming_webhook_channel_id: str | None = Field(default=None, max_length=40)
    incoming_webhook_configuration_url: str | None = Field(default=None, max_length=400)
    token_type: str | None = Field(default=None, max_length=40)
    installed_at: datetime = Field(default_factory=utcnow)


class InstallationEventKind(StrEnum):
    INSTALLED = "installed"
    """Through /slack/install (again: the same install, updated)."""
    TOKENS_REVOKED = "tokens_revoked"
    """Slack's `tokens_revoked`: the bot's token, or people's, no longer work."""
    UNINSTALLED = "uninstalled"
    """Slack's `app_uninstalled`: every token of the install is gone."""


class InstallationEvent(SQLModel, table=True):
    """What happened to an OAuth install and when: a record that stays when the tokens it
    speaks of are deleted."""

    __tablename__ = "installation_event"

    id: int | None = Field(default=None, primary_key=True)
    installation: str = Field(max_length=90, index=True)
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    kind: InstallationEventKind = Field(
        sa_column=enum_column(InstallationEventKind, name="ck_installation_event_kind", length=20)
    )
    bot: bool = Field(default=False)
    """The bot's token was installed, or revoked and deleted."""
    user_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    """Who installed, or whose user tokens were revoked."""
    event_id: str | None = Field(default=None, max_length=80, unique=True)
    """Slack's event id, so an event Slack delivers again is recorded once. Unique across the
    deployment: Slack makes an event id unique across all workspaces (bot.store.dedupe)."""
    suspended_debates: int = Field(default=0)
    """Uninstalled or the bot's token revoked: the workspace's unfinished debates it stopped."""
    dropped_messages: int = Field(default=0)
    """… and the messages owed to the workspace it dropped (kept as failed outbox rows, with
    the reason)."""
    created_at: datetime = Field(default_factory=utcnow)


class OAuthState(SQLModel, table=True):
    """An install in progress: the state parameter /slack/install handed out, kept as its
    SHA-256 (the row alone cannot finish someone's install), consumed once at the redirect."""

    __tablename__ = "oauth_state"

    digest: str = Field(primary_key=True, max_length=64)
    expires_at: datetime = Field(index=True)
