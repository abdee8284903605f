"""How well a confidence predicts correctness: the Brier score, the expected calibration error
over equal-width bins (the reliability diagram's data) and the AUROC.

Each takes the confidences (probabilities that the verdict is right, in [0, 1]) and whether
each verdict was right, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ECE_BINS = 10
"""Bins of the expected calibration error and the reliability diagram: ten of width 0.1, bin i
holding the confidences in [i/10, (i+1)/10), the last one 1.0 too. Ten is the usual choice, and
with a few hundred labels each bin still holds enough to read an accuracy from."""


def _checked(confidences: Sequence[float], correct: Sequence[bool]) -> None:
    if len(confidences) != len(correct):
        raise ValueError(f"{len(confidences)} confidences for {len(correct)} outcomes")
    for value in confidences:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"confidence {value} is outside [0, 1]")


def brier(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Mean squared gap between confidence and outcome (1 right, 0 wrong); lower is better,
    0.25 is what a constant 0.5 scores. None without labels."""
    _checked(confidences, correct)
    if not confidences:
        return None
    return sum((p - float(y)) ** 2 for p, y in zip(confidences, correct, strict=True)) / len(
        confidences
    )


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of the reliability diagram: its confidence range, how many verdicts fell in it,
    their mean confidence and the share of them that was right (None when empty)."""

    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def bin_of(confidence: float, bins: int = ECE_BINS) -> int:
    """The index of the equal-width bin `confidence` falls in."""
    return min(bins - 1, math.floor(confidence * bins))


def reliability(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS
) -> list[ReliabilityBin]:
    """Every bin of the reliability diagram, empty ones included."""
    _checked(confidences, correct)
    if bins < 1:
        raise ValueError(f"the reliability diagram needs at least one bin, got {bins}")
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, y in zip(confidences, correct, strict=True):
        members[bin_of(p, bins)].append((p, y))
    rows = []
    for index, inside in enumerate(members):
        count = len(inside)
        rows.append(
            ReliabilityBin(
                lower=index / bins,
                upper=(index + 1) / bins,
                count=count,
                mean_confidence=sum(p for p, _ in inside) / count if count else None,
                accuracy=sum(1 for _, y in inside if y) / count if count else None,
            )
        )
    return rows


def expected_calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS
) -> float | None:
    """Sum over the bins of (share of verdicts in the bin) x |accuracy - mean confidence|: how
    far, on average, the confidence is from the rate at which such verdicts are right. None
    without labels."""
    if not confidences:
        _checked(confidences, correct)
        return None
    total = len(confidences)
    return sum(
        row.count / total * abs((row.accuracy or 0.0) - (row.mean_confidence or 0.0))
        for row in reliability(confidences, correct, bins)
        if row.count
    )


def auroc(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """The chance that a right verdict has a higher confidence than a wrong one (a tie counts
    half): 0.5 is no better than chance, 1 separates them perfectly. None unless there are
    both right and wrong verdicts. Computed from average ranks (Mann-Whitney U)."""
    _checked(confidences, correct)
    right = sum(1 for y in correct if y)
    wrong = len(correct) - right
    if not right or not wrong:
        return None
    order = sorted(range(len(confidences)), key=lambda i: confidences[i])
    ranks = [0.0] * len(order)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and confidences[order[end + 1]] == confidences[order[start]]:
            end += 1
        average = (start + end) / 2 + 1  # ranks are 1-based
        for position in range(start, end + 1):
            ranks[order[position]] = average
        start = end + 1
    rank_sum = sum(rank for rank, y in zip(ranks, correct, strict=True) if y)
    return (rank_sum - right * (right + 1) / 2) / (right * wrong)
