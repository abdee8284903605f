"""The table of messages owed to people (`outbox`) and the kinds and states of its rows
(bot.store.outbox writes them, bot.jobs.delivery sends them)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import utcnow


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
    in_doubt_at: datetime | None = None
    """When a post was last handed to Slack with no answer recorded (bot.jobs.resend_check)."""
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
