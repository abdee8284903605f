"""The table of Slack events kept for later (`held_trigger`): a reaction, an ADR post or a
message to the agent that arrived while Slack refused the workspace's bot token, or while Slack
failed to give what it needs (a thread it could not read). Slack was answered 200 for each, so
it never sends them again: the row is the only copy (bot.store.held, bot.slack.held)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import utcnow


class HeldReason(StrEnum):
    """Why an event waits."""

    TOKEN_REFUSED = "token_refused"
    """Slack refuses the workspace's bot token: replayed once the token works again."""
    SLACK_FAILED = "slack_failed"
    """Slack failed for a moment (a 5xx, a rate limit, no answer) reading what the event
    needs: replayed at `due_at`, a bounded number of times."""


class HeldTrigger(WorkspaceOwned, table=True):
    """One Slack event, whole, waiting to be handled again, once per workspace and key."""

    __tablename__ = "held_trigger"
    __table_args__ = (UniqueConstraint("team_id", "key", name="uq_held_trigger_team_key"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=255)
    """`event:<Slack's event id>`, as a handled event is keyed (bot.store.dedupe)."""
    body: str = Field(sa_column=Column(Text, nullable=False))
    """The request's body as Slack sent it (JSON), replayed through the app as it is."""
    user_id: str | None = Field(default=None, max_length=40)
    """Who sent it, to be told if it is given up."""
    channel_id: str | None = Field(default=None, max_length=40)
    reason: HeldReason = Field(
        sa_column=enum_column(HeldReason, name="ck_held_trigger_reason", length=20)
    )
    event_at: datetime = Field(default_factory=utcnow)
    """When Slack says the event happened (its `event_time`)."""
    due_at: datetime = Field(default_factory=utcnow, index=True)
    """When it may be replayed next."""
    attempts: int = 0
    """How many times it was replayed."""
    claimed_by: str | None = Field(default=None, max_length=200)
    claimed_until: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
