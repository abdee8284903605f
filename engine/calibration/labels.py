"""A label: what people (or an eval's expected verdict) said about one verdict, beside the
confidence that verdict had and what that confidence was made of."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from engine.confidence import ConfidenceComponents


class LabelKind(StrEnum):
    """Where a label comes from; feedback is the weaker kind and is kept apart."""

    REVIEW = "review"
    """A reviewer's Approve (the verdict stands: right) or Reject (it does not: wrong)."""
    EVAL = "eval"
    """A `debatebot eval` run: right when its decision is the case's expected verdict."""
    FEEDBACK = "feedback"
    """A reader's thumbs up (right) or down (wrong): anyone may click, on a glance."""


STRONG_KINDS = frozenset({LabelKind.REVIEW, LabelKind.EVAL})
"""The kinds calibration is measured and fitted on; feedback is shown on its own."""


class Label(BaseModel):
    """One verdict, labelled right or wrong, with its recorded confidence and (when the verdict
    recorded them) the components and weights version that produced it."""

    model_config = ConfigDict(frozen=True)

    kind: LabelKind
    task_type: str
    correct: bool
    confidence: float = Field(ge=0.0, le=1.0)
    components: ConfidenceComponents | None = None
    weights_version: str | None = None
    sampled: bool = False
    """The verdict did not escalate and was drawn at random for review."""
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """The escalation threshold the verdict was decided under (None: not recorded): a sampled
    review stands for the verdicts at or above it only."""
