"""The guaranteed escalation threshold (issue 48) in the synthetic world of
`benchmarks.calibration`: labels drawn at random from a large world of verdicts scored by the
default weights, each draw's guaranteed threshold (`engine.calibration.guarantee`) applied to
the whole world, whose error at that threshold is the one future verdicts would see.

The world is a fixed pool of verdicts; a draw takes its labels from it at random with
replacement, so the pool is exactly the population the labels are exchangeable with, and its
error at a threshold is the realised risk on fresh draws (their limit). Used by
`benchmarks.calibration` (the printed table) and by the CI test that checks the guarantee
(tests/unit/test_calibration_guarantee.py).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.calibration import world
from engine.calibration.guarantee import (
    DEFAULT_ALPHA,
    DEFAULT_DELTA,
    Guaranteed,
    Reading,
    Unsupported,
    describe,
    guarantee,
)
from engine.calibration.threshold import DEFAULT_TARGET, recommend_threshold
from engine.confidence import DEFAULT_WEIGHTS


class World:
    """A pool of verdicts: their confidences under the default weights and whether each is
    right, sorted by confidence, with what any threshold does to all of them."""

    def __init__(self, size: int, seed: int) -> None:
        scored = sorted((DEFAULT_WEIGHTS.score(v.components), v.correct) for v in world(size, seed))
        self.confidences = [p for p, _ in scored]
        self.correct = [y for _, y in scored]
        self._wrong_below = [0]
        for right in self.correct:
            self._wrong_below.append(self._wrong_below[-1] + (not right))

    def at(self, threshold: float) -> tuple[float, float, float]:
        """(error among the verdicts not escalated, share of wrong verdicts not escalated,
        share escalated) at `threshold`; an error of 0 when nothing is kept."""
        n = len(self.confidences)
        below = bisect.bisect_left(self.confidences, threshold)
        wrong = self._wrong_below[-1]
        wrong_kept = wrong - self._wrong_below[below]
        kept = n - below
        return (wrong_kept / kept if kept else 0.0, wrong_kept / wrong, below / n)

    def draw(self, labels: int, rng: random.Random) -> tuple[list[float], list[bool]]:
        """`labels` verdicts drawn at random (with replacement), as the labels would be."""
        picks = [rng.randrange(len(self.confidences)) for _ in range(labels)]
        return [self.confidences[i] for i in picks], [self.correct[i] for i in picks]


RISK_INDEX = {Reading.KEPT: 0, Reading.CAUGHT: 1}


@dataclass(frozen=True)
class Draw:
    """One draw: each reading's guaranteed threshold (None: refused), the recommended one, and
    the refusal's count of labels needed (None when supported or not given)."""

    guaranteed: dict[Reading, float | None]
    more_labels: dict[Reading, int | None]
    recommended: float | None


def run_draws(
    pool: World,
    labels: int,
    draws: int,
    *,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    target: float = DEFAULT_TARGET,
) -> list[Draw]:
    """`draws` seeded draws of `labels` labels, each with its thresholds."""
    out = []
    for index in range(draws):
        confidences, correct = pool.draw(labels, random.Random(seed * 1_000_003 + index))
        chosen: dict[Reading, float | None] = {}
        more: dict[Reading, int | None] = {}
        for reading in Reading:
            outcome = guarantee(confidences, correct, reading=reading, alpha=alpha, delta=delta)
            chosen[reading] = outcome.threshold if isinstance(outcome, Guaranteed) else None
            more[reading] = outcome.more_labels if isinstance(outcome, Unsupported) else None
        advice = recommend_threshold(confidences, correct, target)
        out.append(Draw(chosen, more, advice.threshold if advice else None))
    return out


def exceeded_share(
    pool: World, results: Sequence[Draw], reading: Reading, alpha: float = DEFAULT_ALPHA
) -> float:
    """The share of draws whose guaranteed threshold lets the world's risk pass alpha (a
    refusal prints no threshold, so it never does)."""
    over = 0
    for result in results:
        threshold = result.guaranteed[reading]
        if threshold is not None and pool.at(threshold)[RISK_INDEX[reading]] > alpha:
            over += 1
    return over / len(results)


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _summary(pool: World, thresholds: Sequence[float | None]) -> str:
    """Supported share, median threshold, error among the kept (mean / p90), wrong not
    escalated (mean / p90) and share escalated (mean), over the draws that gave a threshold."""
    given = [t for t in thresholds if t is not None]
    if not given:
        return f"{0:>9.0%} {'-':>9} {'-':>17} {'-':>17} {'-':>9}"
    at = [pool.at(t) for t in given]
    kept = [a[0] for a in at]
    missed = [a[1] for a in at]
    escalated = sum(a[2] for a in at) / len(at)
    return (
        f"{len(given) / len(thresholds):>9.0%} {_percentile(given, 0.5):>9.3f}"
        f" {sum(kept) / len(kept):>8.1%} {_percentile(kept, 0.9):>8.1%}"
        f" {sum(missed) / len(missed):>8.1%} {_percentile(missed, 0.9):>8.1%}"
        f" {escalated:>9.0%}"
    )


def report(
    *,
    pool_size: int = 20_000,
    draws: int = 1000,
    seed: int = 7,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
) -> None:
    """Print the guarantee lines (200 labels a draw) and the table for 50, 200 and 1,000."""
    pool = World(pool_size, seed)
    wrong = sum(not y for y in pool.correct) / len(pool.correct)
    print(
        f"\nguaranteed thresholds (issue 48): a world of {pool_size} verdicts ({wrong:.1%} wrong),"
        f" default weights; {draws} seeded draws of labels from it, each threshold applied to"
        f" the whole world; alpha {alpha:g}, delta {delta:g}"
    )
    by_size = {
        size: run_draws(pool, size, draws, seed=seed, alpha=alpha, delta=delta)
        for size in (50, 200, 1000)
    }
    for reading in Reading:
        measured = exceeded_share(pool, by_size[200], reading, alpha)
        print(
            f"guarantee {describe(reading, alpha)} ({draws} draws of 200 labels):"
            f" goal ≤ {delta:g}, measured {measured:.3f}"
        )
    print(
        f"\n{'labels':>6} {'threshold':<22} {'supported':>9} {'median':>9}"
        f" {'kept wrong mean/p90':>17} {'wrong kept mean/p90':>17} {'escalated':>9}"
    )
    for size, results in by_size.items():
        rows = {
            "guaranteed (kept)": [r.guaranteed[Reading.KEPT] for r in results],
            "guaranteed (caught)": [r.guaranteed[Reading.CAUGHT] for r in results],
            f"recommended ({DEFAULT_TARGET:.0%})": [r.recommended for r in results],
        }
        for name, thresholds in rows.items():
            print(f"{size:>6} {name:<22} {_summary(pool, thresholds)}")
    print(
        "kept wrong: the error among the verdicts not escalated; wrong kept: the share of wrong"
        " verdicts not escalated; over the draws that gave a threshold (a refusal gives none)"
    )
