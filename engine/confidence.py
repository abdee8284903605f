"""The evidence-based confidence model: what a verdict's confidence is made of, and the
versioned weights that turn those components into one number.

Every component is computed in code from what can be checked (independent judges, citations
found in the context, objections left unanswered, degenerate-output findings); the model's own
declared level is one small input, never the base. The weights are a logistic model, optionally
followed by a monotone (isotonic) map fitted on the team's own review labels; every verdict
records the version of the weights that scored it.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from enum import StrEnum

from pydantic import BaseModel, Field, model_validator


class Component(StrEnum):
    """One input of the confidence model, each scaled to [0, 1]."""

    AGREEMENT = "agreement"
    """Share of independent judges reaching the verdict's decision."""
    POSITION_BIAS = "position_bias"
    """1 when swapping the sides flipped an independent judge's decision, else 0."""
    GROUNDING = "grounding"
    """Share of cited evidence found in the context."""
    UNANSWERED = "unanswered"
    """Share of objections left unanswered (or the missing margin: votes, convergence, judge)."""
    OUTPUT_CHECKS = "output_checks"
    """Degenerate-output findings, as min(1, findings / 3)."""
    DECLARED = "declared"
    """The model's own declared level: LOW 0, MODERATE 0.5, HIGH 1."""


class ConfidenceComponents(BaseModel):
    """The measured components of one verdict; None where a component was not measured
    (no independent judge ran, nothing was cited)."""

    values: dict[Component, float | None] = Field(default_factory=dict)
    notes: dict[Component, str] = Field(default_factory=dict)
    """What each measurement was, in words a reviewer reads in a second ("judges agree 1 of 3",
    "2 of 5 citations not found"); a component whose note is empty is left out of `line`."""

    @model_validator(mode="after")
    def _in_unit_interval(self) -> ConfidenceComponents:
        for name, value in self.values.items():
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"component {name} is {value}, outside [0, 1]")
        return self

    def value(self, component: Component) -> float | None:
        return self.values.get(component)

    def line(self) -> str:
        """What the confidence is made of, in one line: the notes in component order."""
        return " \u00b7 ".join(
            note for component in Component if (note := self.notes.get(component, ""))
        )


class IsotonicMap(BaseModel):
    """A non-decreasing piecewise-linear map from the logistic score to a probability."""

    xs: list[float] = Field(min_length=2)
    ys: list[float] = Field(min_length=2)

    @model_validator(mode="after")
    def _monotone(self) -> IsotonicMap:
        if len(self.xs) != len(self.ys):
            raise ValueError("isotonic map needs as many ys as xs")
        if any(b < a for a, b in zip(self.xs, self.xs[1:], strict=False)):
            raise ValueError("isotonic map xs must be non-decreasing")
        if any(b < a for a, b in zip(self.ys, self.ys[1:], strict=False)):
            raise ValueError("isotonic map ys must be non-decreasing")
        return self

    def __call__(self, x: float) -> float:
        if x <= self.xs[0]:
            return self.ys[0]
        if x >= self.xs[-1]:
            return self.ys[-1]
        i = bisect_right(self.xs, x) - 1
        x0, x1, y0, y1 = self.xs[i], self.xs[i + 1], self.ys[i], self.ys[i + 1]
        return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class Contribution(BaseModel):
    """What one component added to the logit: its value (or the neutral value used when it
    was not measured) times its weight."""

    component: Component
    value: float | None
    used: float
    weight: float
    logit: float


class ConfidenceWeights(BaseModel):
    """A versioned logistic model: confidence = sigmoid(intercept + sum(weight * value)),
    then the isotonic map when one was fitted. A component not measured counts at its
    neutral value."""

    version: str
    intercept: float
    weights: dict[Component, float]
    neutral: dict[Component, float] = Field(default_factory=dict)
    isotonic: IsotonicMap | None = None
    source: str = "default"
    """Where these weights come from: "default", or the fit that proposed them."""

    def contributions(self, components: ConfidenceComponents) -> list[Contribution]:
        rows: list[Contribution] = []
        for component, weight in self.weights.items():
            value = components.value(component)
            used = value if value is not None else self.neutral.get(component, 0.0)
            rows.append(
                Contribution(
                    component=component,
                    value=value,
                    used=used,
                    weight=weight,
                    logit=weight * used,
                )
            )
        return rows

    def logit(self, components: ConfidenceComponents) -> float:
        return self.intercept + sum(row.logit for row in self.contributions(components))

    def score(self, components: ConfidenceComponents) -> float:
        """The confidence of `components`, in [0, 1]."""
        raw = _sigmoid(self.logit(components))
        return min(1.0, max(0.0, self.isotonic(raw) if self.isotonic is not None else raw))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


DEFAULT_WEIGHTS = ConfidenceWeights(
    version="default-1",
    intercept=-3.2,
    weights={
        Component.AGREEMENT: 3.0,
        Component.POSITION_BIAS: -1.0,
        Component.GROUNDING: 2.2,
        Component.UNANSWERED: -1.2,
        Component.OUTPUT_CHECKS: -7.2,
        Component.DECLARED: 0.4,
    },
    neutral={
        Component.AGREEMENT: 0.5,
        Component.POSITION_BIAS: 0.0,
        Component.GROUNDING: 0.5,
        Component.UNANSWERED: 0.5,
        Component.OUTPUT_CHECKS: 0.0,
        Component.DECLARED: 0.5,
    },
)
"""The weights every verdict is scored with until a team adopts fitted ones, chosen by hand
for these cases at the default escalation threshold of 0.6 (docs/architecture.md,
"Confidence", tabulates them):

- everything checked and good (the judge agrees, every citation found, nothing unanswered, no
  output finding, declared HIGH) scores 0.92;
- the one independent judge reaching another decision sends the verdict to people (0.35 with
  everything else good): agreement weighs most, as the one component that asks the question
  again;
- every citation invented sends it to people (0.55); citing nothing does not by itself (0.79):
  an invented quote is evidence against the debate, a missing one only no evidence for it;
- one degenerate-output finding halves the best case (0.50);
- the declared level moves the logit by at most 0.4 (about 0.05 near the threshold): recorded,
  never the base; a judge flipped by swapping the sides costs a further 1.0.

A component not measured counts at its neutral value: agreement 0.5 (no judge ran: a coin
flip), grounding, unanswered and declared 0.5, position bias and output checks 0. Each weight's
sign keeps the confidence monotone in its component: more agreement or grounding never lowers
it; more bias, unanswered objections or findings never raise it."""
