"""The tables of confidence calibration: verdicts labelled right or wrong
(`calibration_label`), the weights versions fits propose (`confidence_weights`) and their
adoptions (`weights_adoption`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.store.columns import WorkspaceOwned, enum_column
from engine.calibration.labels import LabelKind
from engine.models import utcnow


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
    threshold: float | None = None  # the escalation threshold its verdict was decided under
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
