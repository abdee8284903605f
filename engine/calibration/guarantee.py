"""The escalation threshold with a stated guarantee (Learn-then-Test): with probability at least
1 - delta over the labels, the threshold keeps the risk at most alpha, for one of two readings:

- `Reading.KEPT`: at most alpha of the verdicts that are NOT escalated are wrong;
- `Reading.CAUGHT`: at most alpha of the wrong verdicts are not escalated (at least 1 - alpha of
  them go to people).

The candidate thresholds are a fixed grid (0.000 to 1.000 in steps of 0.001, chosen before any
label is seen), tested in a fixed sequence from the highest (escalate nearly everything) down:
each null hypothesis "the risk at t exceeds alpha" is rejected when the exact binomial p-value
P(X <= wrong; n, alpha) is at most delta (the Clopper–Pearson upper bound at most alpha), and
the sequence stops at the first that is not. A fixed sequence needs no correction for the
number of thresholds tried; the threshold given is the lowest rejected one.

Two rules keep the guarantee true where the labels are not a plain random sample:
- KEPT skips (without stopping) the highest thresholds at which fewer labels are kept than any
  test could pass on (`fewest_trials`): they cannot be rejected, and the skip depends only on
  the confidences, not on which verdicts were wrong.
- Sampled reviews are drawn only among verdicts that did not escalate, so for KEPT no
  threshold below the highest escalation threshold they were drawn under (`floor`) is tried:
  below it the labels hold none of the verdicts that escalated. For CAUGHT they only make the
  test stricter (their wrong verdicts are the confident ones), so they count.

A verdict escalates when its confidence is below the threshold, as in the protocols.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from engine.calibration.binomial import (
    clopper_pearson_upper,
    fewest_trials,
    rejects,
    trials_needed,
)

DEFAULT_ALPHA = 0.05
DEFAULT_DELTA = 0.10
GRID = 1000
"""Candidate thresholds are i / GRID for i = GRID down to 0."""


class Reading(StrEnum):
    """Which risk the guarantee bounds."""

    KEPT = "kept"
    """Wrong verdicts among those not escalated."""
    CAUGHT = "caught"
    """Wrong verdicts not escalated, among the wrong ones."""


READING_TEXT = {
    Reading.KEPT: "at most {alpha:.0%} of the verdicts not escalated are wrong",
    Reading.CAUGHT: "at least {caught:.0%} of the wrong verdicts are escalated",
}


def describe(reading: Reading, alpha: float) -> str:
    """The guarantee in words, as the report and the verdict's line print it."""
    return READING_TEXT[reading].format(alpha=alpha, caught=1 - alpha)


@dataclass(frozen=True)
class Guaranteed:
    """A threshold the labels support, and what it does on them."""

    reading: Reading
    alpha: float
    delta: float
    threshold: float
    labels: int
    escalated_share: float
    """Share of the labels whose confidence is below the threshold."""
    trials: int
    """Verdicts the bound is over: those kept (KEPT) or the wrong ones (CAUGHT)."""
    events: int
    """Of those, the wrong ones kept."""
    upper_bound: float
    """The Clopper–Pearson upper bound on the risk at the threshold, at level 1 - delta."""


@dataclass(frozen=True)
class Unsupported:
    """No threshold is supported; `reason` says why and `more_labels` how many more labels of
    the current error rate it would take (None when more labels alone would not do)."""

    reading: Reading
    alpha: float
    delta: float
    labels: int
    reason: str
    more_labels: int | None


Outcome = Guaranteed | Unsupported


def _validated(
    alpha: float, delta: float, confidences: Sequence[float], correct: Sequence[bool]
) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha (the risk allowed) must be in (0, 1), got {alpha}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta (the chance the guarantee fails) must be in (0, 1), got {delta}")
    if len(confidences) != len(correct):
        raise ValueError(f"{len(confidences)} confidences for {len(correct)} outcomes")


def guarantee(
    confidences: Sequence[float],
    correct: Sequence[bool],
    *,
    reading: Reading,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    floor: float = 0.0,
) -> Outcome:
    """The lowest threshold on the grid the fixed sequence supports for `reading`, or why none
    is. `floor`: the lowest threshold KEPT may try (see the module's docstring)."""
    _validated(alpha, delta, confidences, correct)
    if not confidences:
        reason = (
            "there are no sampled reviews or eval labels to rest on yet: let the sampled reviews"
            " come in, or import an eval (`debatebot calibration import-eval`)"
        )
        return Unsupported(reading, alpha, delta, 0, reason, None)
    if reading is Reading.KEPT:
        return _kept(confidences, correct, alpha, delta, floor)
    return _caught(confidences, correct, alpha, delta)


def _supported(
    reading: Reading,
    confidences: Sequence[float],
    step: int,
    trials: int,
    events: int,
    alpha: float,
    delta: float,
) -> Guaranteed:
    """The guarantee at grid `step`: `events` of `trials` (as `reading` counts them) bounded at
    level 1 - delta, and the share of the labels that threshold escalates."""
    threshold = step / GRID
    return Guaranteed(
        reading=reading,
        alpha=alpha,
        delta=delta,
        threshold=threshold,
        labels=len(confidences),
        escalated_share=sum(1 for p in confidences if p < threshold) / len(confidences),
        trials=trials,
        events=events,
        upper_bound=clopper_pearson_upper(events, trials, delta),
    )


def _kept(
    confidences: Sequence[float], correct: Sequence[bool], alpha: float, delta: float, floor: float
) -> Outcome:
    n = len(confidences)
    pairs = sorted(zip(confidences, correct, strict=True), key=lambda pair: -pair[0])
    least = fewest_trials(alpha, delta)
    lowest = max(0, math.ceil(floor * GRID - 1e-9))
    kept = wrong = position = 0
    chosen: tuple[int, int, int] | None = None
    last: tuple[int, int, bool] | None = None
    for step in range(GRID, lowest - 1, -1):
        threshold = step / GRID
        while position < n and pairs[position][0] >= threshold:
            kept += 1
            wrong += not pairs[position][1]
            position += 1
        if kept < least:
            continue
        if last is None or last[:2] != (kept, wrong):
            last = (kept, wrong, rejects(wrong, kept, alpha, delta))
        if not last[2]:
            break
        chosen = (step, kept, wrong)
    if chosen is not None:
        step, kept, wrong = chosen
        return _supported(Reading.KEPT, confidences, step, kept, wrong, alpha, delta)
    return _kept_refusal(pairs, alpha, delta, floor)


def _kept_refusal(
    pairs: Sequence[tuple[float, bool]], alpha: float, delta: float, floor: float
) -> Unsupported:
    """Why KEPT supports no threshold, and how many labels would do at the error rates the
    labels show among their most confident verdicts (the best over the cut-offs above
    `floor`)."""
    n = len(pairs)
    least = fewest_trials(alpha, delta)
    cuts: list[tuple[int, int]] = []
    wrong = 0
    for kept, (confidence, right) in enumerate(pairs, 1):
        if confidence < floor:
            break
        wrong += not right
        if kept == n or pairs[kept][0] != confidence:
            cuts.append((kept, wrong))
    # Only cut-offs that no larger one matches with a lower or equal error rate can need the
    # fewest labels; the search for each is the costly part.
    frontier: list[tuple[int, int]] = []
    for kept, wrong in reversed(cuts):
        if not frontier or wrong * frontier[-1][0] < frontier[-1][1] * kept:
            frontier.append((kept, wrong))
    best: int | None = None
    for kept, wrong in frontier:
        if best is not None and least * n / kept >= best:
            continue  # even a rate of zero would need more labels here
        needed = trials_needed(wrong / kept, alpha, delta)
        if needed is not None:
            labels = math.ceil(needed * n / kept)
            best = labels if best is None else min(best, labels)
    where = f" at or above {floor:.3f}" if floor > 0 else ""
    if best is None:
        reason = (
            f"among the {n} labels, the verdicts kept at every threshold{where} are wrong at"
            f" least {alpha:.0%} of the time: at that error rate no number of labels supports a"
            " threshold (with few labels this may be chance: label more and look again)"
        )
        return Unsupported(Reading.KEPT, alpha, delta, n, reason, None)
    more = max(1, best - n)
    reason = (
        f"{n} labels cannot show, with probability {1 - delta:.0%}, that"
        f" {describe(Reading.KEPT, alpha)} at any threshold{where}; at the error"
        f" rate of their most confident verdicts, about {more} more labels would support one"
    )
    return Unsupported(Reading.KEPT, alpha, delta, n, reason, more)


def _caught(
    confidences: Sequence[float], correct: Sequence[bool], alpha: float, delta: float
) -> Outcome:
    n = len(confidences)
    wrong = sorted((p for p, y in zip(confidences, correct, strict=True) if not y), reverse=True)
    least = fewest_trials(alpha, delta)
    if len(wrong) < least:
        if not wrong:
            reason = (
                f"none of the {n} labels is a wrong verdict: there is no error rate to plan"
                " from; label more verdicts (sampled reviews, evals)"
            )
            return Unsupported(Reading.CAUGHT, alpha, delta, n, reason, None)
        more = math.ceil(least * n / len(wrong)) - n
        reason = (
            f"{len(wrong)} wrong verdicts among {n} labels cannot show, with probability"
            f" {1 - delta:.0%}, that {describe(Reading.CAUGHT, alpha)}: that takes at least"
            f" {least} wrong ones; at the current error rate ({len(wrong) / n:.0%}), about"
            f" {more} more labels"
        )
        return Unsupported(Reading.CAUGHT, alpha, delta, n, reason, more)
    missed = position = 0
    chosen: tuple[int, int] | None = None
    for step in range(GRID, -1, -1):
        threshold = step / GRID
        while position < len(wrong) and wrong[position] >= threshold:
            missed += 1
            position += 1
        if not rejects(missed, len(wrong), alpha, delta):
            break
        chosen = (step, missed)
    if chosen is None:
        reason = (
            f"{len(wrong) - sum(1 for p in wrong if p < 1.0)} of the {len(wrong)} wrong verdicts"
            " have confidence 1.0: no threshold escalates them"
        )
        return Unsupported(Reading.CAUGHT, alpha, delta, n, reason, None)
    step, missed = chosen
    return _supported(Reading.CAUGHT, confidences, step, len(wrong), missed, alpha, delta)
