"""The table of a workspace's escalation-threshold choices (`threshold_adoption`): adopting a
weights version can adopt its guaranteed threshold, or the labels' recommended one, or keep the
deployment's fixed one. The newest row is the workspace's setting; a channel's own threshold
still wins over it (bot.intake.policy)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import ThresholdSource, utcnow


class ThresholdAdoption(WorkspaceOwned, table=True):
    """One choice of where a workspace's escalation threshold comes from, with the value it
    adopted (None for fixed: the deployment's DEBATEBOT_ESCALATION_THRESHOLD)."""

    __tablename__ = "threshold_adoption"

    id: int | None = Field(default=None, primary_key=True)
    source: ThresholdSource = Field(
        sa_column=enum_column(ThresholdSource, name="ck_threshold_adoption_source", length=20)
    )
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    version: str | None = Field(default=None, max_length=40)
    """The weights version whose confidence the threshold applies to."""
    adopted_by: str = Field(max_length=80)
    adopted_at: datetime = Field(default_factory=utcnow)
