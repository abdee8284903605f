"""The escalation threshold the labels recommend: the lowest one that would have sent at least
a target share of the wrong verdicts to people, so the fewest right ones go needlessly.

A verdict escalates when its confidence is below the threshold (as in the protocols). Raising
the threshold only ever adds escalations, so the lowest threshold that reaches the target also
has the fewest needless ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_TARGET = 0.95
"""Share of wrong verdicts the recommended threshold must send to people."""


@dataclass(frozen=True)
class EscalationCounts:
    """What a threshold would have escalated among labelled verdicts."""

    threshold: float
    wrong: int
    wrong_escalated: int
    right: int
    right_escalated: int

    @property
    def wrong_share(self) -> float | None:
        """Share of the wrong verdicts sent to people (None without wrong verdicts)."""
        return self.wrong_escalated / self.wrong if self.wrong else None

    @property
    def needless_share(self) -> float | None:
        """Share of the right verdicts sent to people needlessly (None without right ones)."""
        return self.right_escalated / self.right if self.right else None


@dataclass(frozen=True)
class ThresholdAdvice:
    """The recommended threshold and what it would have escalated; `reached` is False when no
    threshold can reach the target (a wrong verdict at confidence 1)."""

    target: float
    counts: EscalationCounts
    reached: bool

    @property
    def threshold(self) -> float:
        return self.counts.threshold


def escalation_at(
    confidences: Sequence[float], correct: Sequence[bool], threshold: float
) -> EscalationCounts:
    """What `threshold` escalates: every verdict whose confidence is below it."""
    if len(confidences) != len(correct):
        raise ValueError(f"{len(confidences)} confidences for {len(correct)} outcomes")
    wrong = [p for p, y in zip(confidences, correct, strict=True) if not y]
    right = [p for p, y in zip(confidences, correct, strict=True) if y]
    return EscalationCounts(
        threshold=threshold,
        wrong=len(wrong),
        wrong_escalated=sum(1 for p in wrong if p < threshold),
        right=len(right),
        right_escalated=sum(1 for p in right if p < threshold),
    )


def recommend_threshold(
    confidences: Sequence[float], correct: Sequence[bool], target: float = DEFAULT_TARGET
) -> ThresholdAdvice | None:
    """The lowest threshold escalating at least `target` of the wrong verdicts, placed halfway
    between the confidence of the last wrong verdict it must catch and the next higher
    confidence among all labels (1.0 when there is none), so a label at either end stays on
    its side. None without wrong verdicts: there is nothing to catch."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the target share of wrong verdicts must be in (0, 1], got {target}")
    wrong = sorted(p for p, y in zip(confidences, correct, strict=True) if not y)
    if not wrong:
        return None
    # Catching k wrong verdicts means the threshold must pass the k-th lowest of them.
    needed = max(1, math.ceil(target * len(wrong) - 1e-9))
    last = wrong[needed - 1]
    if last >= 1.0:
        counts = escalation_at(confidences, correct, 1.0)
        return ThresholdAdvice(target=target, counts=counts, reached=False)
    above = [p for p in confidences if p > last]
    threshold = (last + (min(above) if above else 1.0)) / 2
    counts = escalation_at(confidences, correct, threshold)
    return ThresholdAdvice(target=target, counts=counts, reached=True)
