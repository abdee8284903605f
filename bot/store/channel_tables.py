"""The table of a channel's settings (`channel_settings`), one row per workspace and
channel (bot.store.channels)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned
from engine.models import DEFAULT_PROTOCOL, utcnow


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
