"""The guaranteed escalation threshold (engine/calibration/guarantee.py): in the synthetic world
of `benchmarks.calibration`, over 1,000 seeded draws of 200 labels, the world's risk at the
threshold a draw gives passes alpha in at most delta of the draws, for both readings; too few
labels give a refusal with the count of labels needed, never a threshold."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.guarantee_world import World, exceeded_share, run_draws
from engine.calibration.guarantee import Guaranteed, Reading, Unsupported, guarantee

ALPHA, DELTA, DRAWS = 0.05, 0.10, 1000
SLACK = 3 * math.sqrt(DELTA * (1 - DELTA) / DRAWS)
"""Three standard deviations of the share of failed draws when each fails with chance delta:
the measured share may pass delta by this much by chance alone (about 1 in 700)."""


@pytest.fixture(scope="module")
def pool() -> World:
    return World(20_000, seed=7)


@pytest.mark.parametrize("reading", list(Reading))
def test_the_guarantee_holds_over_a_thousand_draws_of_200_labels(
    pool: World, reading: Reading
) -> None:
    results = run_draws(pool, 200, DRAWS, seed=1, alpha=ALPHA, delta=DELTA)
    assert exceeded_share(pool, results, reading, ALPHA) <= DELTA + SLACK
    # Not vacuous: the draws do give thresholds.
    supported = sum(r.guaranteed[reading] is not None for r in results) / DRAWS
    assert supported > (0.5 if reading is Reading.KEPT else 0.1)


def test_a_naive_threshold_fails_the_same_check(pool: World) -> None:
    """The check can fail: the lowest threshold whose labels' own error is at most alpha (no
    bound) lets the world's error pass alpha in far more than delta of the draws."""
    over = 0
    for index in range(200):
        confidences, correct = pool.draw(200, random.Random(index))
        pairs = sorted(zip(confidences, correct, strict=True), reverse=True)
        wrong, chosen = 0, 1.0
        for kept, (confidence, right) in enumerate(pairs, 1):
            wrong += not right
            if wrong / kept <= ALPHA:
                chosen = confidence
        over += pool.at(chosen)[0] > ALPHA
    assert over / 200 > DELTA + SLACK


def test_too_few_labels_are_refused_with_the_count_needed(pool: World) -> None:
    counted = 0
    for seed in range(20):
        confidences, correct = pool.draw(30, random.Random(seed))
        for reading in Reading:
            outcome = guarantee(confidences, correct, reading=reading, alpha=ALPHA, delta=DELTA)
            assert isinstance(outcome, Unsupported)
            if outcome.more_labels is not None:
                assert outcome.more_labels > 0
                assert f"about {outcome.more_labels} more labels" in outcome.reason
                counted += 1
            else:  # the most confident labels are wrong too often: said so, no count
                assert "no number of labels" in outcome.reason
        caught = guarantee(confidences, correct, reading=Reading.CAUGHT, alpha=ALPHA, delta=DELTA)
        assert isinstance(caught, Unsupported)
        wrong = sum(not y for y in correct)
        # 45 wrong verdicts are the fewest that can show 95 % caught at 90 %: 0.95^45 <= 0.1.
        assert caught.more_labels == math.ceil(45 * 30 / wrong) - 30
    assert counted >= 30


def test_the_threshold_is_the_lowest_before_the_fixed_sequence_stops() -> None:
    # 60 right verdicts at 0.9, one wrong at 0.5, 40 right at 0.4. At 0.9 (60 kept, none wrong)
    # the bound is under 5 %; at 0.5 (61 kept, 1 wrong: P(Bin(61, .05) <= 1) = 0.18 > 0.1) it is
    # not, and the sequence stops there, though 0.4 alone (101 kept, 1 wrong: 0.037) would pass.
    confidences = [0.9] * 60 + [0.5] + [0.4] * 40
    correct = [True] * 60 + [False] + [True] * 40
    outcome = guarantee(confidences, correct, reading=Reading.KEPT, alpha=ALPHA, delta=DELTA)
    assert isinstance(outcome, Guaranteed)
    assert outcome.threshold == 0.501
    assert (outcome.trials, outcome.events) == (60, 0)
    assert outcome.escalated_share == pytest.approx(41 / 101)
    assert outcome.upper_bound <= ALPHA


def test_sampled_reviews_keep_the_threshold_at_or_above_the_one_they_were_drawn_under() -> None:
    confidences = [0.9] * 80 + [0.7] * 40
    correct = [True] * 120
    free = guarantee(confidences, correct, reading=Reading.KEPT)
    floored = guarantee(confidences, correct, reading=Reading.KEPT, floor=0.8)
    assert isinstance(free, Guaranteed)
    assert free.threshold == 0.0
    assert isinstance(floored, Guaranteed)
    assert floored.threshold == 0.8


def test_the_sequence_stops_where_the_wrong_verdicts_begin() -> None:
    confidences = [0.95] + [0.9] * 120 + [0.3] * 50
    correct = [False] + [True] * 120 + [False] * 50
    outcome = guarantee(confidences, correct, reading=Reading.KEPT)
    assert isinstance(outcome, Guaranteed)
    assert outcome.threshold == 0.301  # never low enough to keep the 0.3s
