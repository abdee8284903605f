"""The table of trigger keys already handled (`processed_trigger`), so Slack's retries
and double clicks are ignored (bot.store.dedupe)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from bot.store.columns import WorkspaceOwned
from engine.models import utcnow


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
