"""Calibration's math against values worked out by hand on small label sets: Brier, ECE,
AUROC, the threshold recommendation, the isotonic map; and fitting, which recovers a known
logistic model from labels drawn from it, beats the defaults, and refuses a fit that does not
beat the weights in use."""

from __future__ import annotations

import random

import pytest

from bot.jobs.sampling import sampling_note
from engine.calibration.current import recorded
from engine.calibration.fitting import (
    FEATURES,
    MIN_GAIN,
    Proposal,
    Refused,
    feature_row,
    fit_isotonic,
    fit_logistic,
    propose,
    split,
)
from engine.calibration.labels import Label, LabelKind
from engine.calibration.metrics import (
    ECE_BINS,
    auroc,
    bin_of,
    brier,
    expected_calibration_error,
    reliability,
)
from engine.calibration.report import NotEnough, calibrate
from engine.calibration.sampling import ReviewSampler
from engine.calibration.threshold import escalation_at, recommend_threshold
from engine.confidence import DEFAULT_WEIGHTS, Component, ConfidenceComponents, ConfidenceWeights

KNOWN = ConfidenceWeights(
    version="known",
    intercept=-1.0,
    weights={
        Component.AGREEMENT: 3.0,
        Component.POSITION_BIAS: -0.5,
        Component.GROUNDING: 1.5,
        Component.UNANSWERED: -2.0,
        Component.OUTPUT_CHECKS: -1.0,
        Component.DECLARED: 0.0,
    },
)
"""The model the synthetic labels are drawn from."""


def drawn_from(model: ConfidenceWeights, n: int, seed: int, task_type: str = "adr") -> list[Label]:
    """`n` labels whose components are random and whose correctness is drawn with the
    probability `model` gives them."""
    rng = random.Random(seed)
    labels = []
    for _ in range(n):
        components = ConfidenceComponents(
            values={
                Component.AGREEMENT: rng.random(),
                Component.POSITION_BIAS: float(rng.random() < 0.3),
                Component.GROUNDING: rng.random(),
                Component.UNANSWERED: rng.random(),
                Component.OUTPUT_CHECKS: rng.choice([0.0, 1 / 3, 2 / 3, 1.0]),
                Component.DECLARED: rng.choice([0.0, 0.5, 1.0]),
            }
        )
        labels.append(
            Label(
                kind=LabelKind.REVIEW,
                task_type=task_type,
                correct=rng.random() < model.score(components),
                confidence=DEFAULT_WEIGHTS.score(components),
                components=components,
            )
        )
    return labels


# --- the scores, by hand -----------------------------------------------------------------------


def test_brier_is_the_mean_squared_gap() -> None:
    # (0.1² + 0.8² + 0.3² + 0.4²) / 4 = (0.01 + 0.64 + 0.09 + 0.16) / 4
    assert brier([0.9, 0.8, 0.3, 0.6], [True, False, False, True]) == pytest.approx(0.225)
    assert brier([0.5] * 4, [True, False, True, False]) == pytest.approx(0.25)
    assert brier([], []) is None


def test_ece_weighs_each_bins_gap_by_its_share() -> None:
    confidences = [0.15, 0.15, 0.85, 0.85, 0.85, 0.95]
    correct = [False, True, True, True, False, True]
    # bin 0.1-0.2: 2 verdicts, mean 0.15, half right: gap 0.35
    # bin 0.8-0.9: 3 verdicts, mean 0.85, two thirds right: gap 0.18333…
    # bin 0.9-1.0: 1 verdict, 0.95, right: gap 0.05
    expected = (2 * 0.35 + 3 * (0.85 - 2 / 3) + 1 * 0.05) / 6
    assert expected_calibration_error(confidences, correct) == pytest.approx(expected)
    assert expected == pytest.approx(1.3 / 6)
    bins = reliability(confidences, correct)
    assert len(bins) == ECE_BINS
    assert [b.count for b in bins] == [0, 2, 0, 0, 0, 0, 0, 0, 3, 1]
    assert bins[8].accuracy == pytest.approx(2 / 3)
    assert bins[8].mean_confidence == pytest.approx(0.85)
    assert bins[0].accuracy is None
    assert expected_calibration_error([], []) is None


def test_bins_are_equal_width_and_the_last_holds_one() -> None:
    assert [bin_of(x) for x in (0.0, 0.1, 0.0999, 0.5, 0.9, 0.95, 1.0)] == [0, 1, 0, 5, 9, 9, 9]
    # A perfectly calibrated set has no error.
    assert expected_calibration_error([1.0, 1.0, 0.0], [True, True, False]) == 0.0


def test_auroc_counts_pairs_and_ties_count_half() -> None:
    # right 0.9 and 0.7, wrong 0.8 and 0.6: 0.9>0.8, 0.9>0.6, 0.7<0.8, 0.7>0.6 → 3 of 4
    assert auroc([0.9, 0.8, 0.7, 0.6], [True, False, True, False]) == pytest.approx(0.75)
    # right 0.5 and 0.9, wrong 0.5 and 0.2: a tie (½) and three wins → 3.5 of 4
    assert auroc([0.5, 0.5, 0.9, 0.2], [True, False, True, False]) == pytest.approx(0.875)
    assert auroc([0.3, 0.3], [True, False]) == pytest.approx(0.5)
    assert auroc([0.9, 0.8], [True, True]) is None


def test_bad_input_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="outside"):
        brier([1.2], [True])
    with pytest.raises(ValueError, match="2 confidences for 1"):
        auroc([0.1, 0.2], [True])


# --- the threshold -----------------------------------------------------------------------------

WRONG = [0.2, 0.4, 0.55, 0.9]
RIGHT = [0.3, 0.5, 0.6, 0.7, 0.8, 0.95]
CONFIDENCES = WRONG + RIGHT
CORRECT = [False] * len(WRONG) + [True] * len(RIGHT)


def test_the_threshold_catches_the_target_share_halfway_to_the_next_label() -> None:
    # 75 % of 4 wrong = 3: past the third lowest wrong (0.55), halfway to the next label (0.6).
    advice = recommend_threshold(CONFIDENCES, CORRECT, target=0.75)
    assert advice is not None
    assert advice.threshold == pytest.approx(0.575)
    assert advice.reached
    counts = advice.counts
    assert (counts.wrong_escalated, counts.wrong) == (3, 4)
    assert (counts.right_escalated, counts.right) == (2, 6)  # 0.3 and 0.5
    assert counts.wrong_share == pytest.approx(0.75)
    assert counts.needless_share == pytest.approx(2 / 6)

    # 95 % of 4 = 3.8, so all four: past 0.9, halfway to 0.95; five right ones go needlessly.
    strict = recommend_threshold(CONFIDENCES, CORRECT, target=0.95)
    assert strict is not None
    assert strict.threshold == pytest.approx(0.925)
    assert (strict.counts.wrong_escalated, strict.counts.right_escalated) == (4, 5)


def test_the_threshold_when_nothing_is_above_or_nothing_is_wrong() -> None:
    # The last wrong verdict is the highest label: halfway to 1.0.
    advice = recommend_threshold([0.8, 0.6], [False, True], target=0.95)
    assert advice is not None
    assert advice.threshold == pytest.approx(0.9)
    # A wrong verdict at confidence 1 cannot be escalated by any threshold.
    unreachable = recommend_threshold([1.0, 0.5], [False, True])
    assert unreachable is not None
    assert not unreachable.reached
    assert unreachable.threshold == 1.0
    assert unreachable.counts.wrong_escalated == 0
    assert recommend_threshold([0.9, 0.4], [True, True]) is None


def test_no_threshold_reaching_the_target_escalates_fewer_right_verdicts() -> None:
    rng = random.Random(11)
    for _ in range(50):
        n = rng.randint(5, 40)
        confidences = [round(rng.random(), 2) for _ in range(n)]
        correct = [rng.random() < c for c in confidences]
        if all(correct):
            continue
        advice = recommend_threshold(confidences, correct, target=0.9)
        assert advice is not None
        assert advice.reached
        candidates = sorted({*confidences, 1.0, 1.01})
        reaching = [
            escalation_at(confidences, correct, t)
            for t in candidates
            if (escalation_at(confidences, correct, t).wrong_share or 0) >= 0.9
        ]
        assert advice.counts.right_escalated == min(c.right_escalated for c in reaching)
        assert (advice.counts.wrong_share or 0) >= 0.9


# --- fitting -----------------------------------------------------------------------------------


def test_isotonic_pools_adjacent_violators_into_centred_knots() -> None:
    mapping = fit_isotonic([0.1, 0.2, 0.3, 0.4, 0.5], [True, False, True, False, True])
    # 1,0 pool to ½; 1 then 0 pool to ½, which joins the first block (0.1-0.4, mean 0.25);
    # the last 1 stays: knots (0.25, ½) and (0.5, 1), anchored at (0, 0) and (1, 1).
    assert mapping.xs == pytest.approx([0.0, 0.25, 0.5, 1.0])
    assert mapping.ys == pytest.approx([0.0, 0.5, 1.0, 1.0])
    assert mapping(0.45) == pytest.approx(0.9)
    # Distinct scores inside a pooled block keep their order (no plateau).
    assert mapping(0.1) < mapping(0.2) < mapping(0.3) < mapping(0.4)
    monotone = fit_isotonic([0.3, 0.1, 0.2], [True, False, True])
    assert monotone.ys == sorted(monotone.ys)


def test_logistic_fit_recovers_the_model_the_labels_came_from() -> None:
    labels = drawn_from(KNOWN, 4000, seed=5)
    rows = [feature_row(label.components, {}) for label in labels if label.components]
    intercept, coefficients = fit_logistic(rows, [label.correct for label in labels])
    assert intercept == pytest.approx(KNOWN.intercept, abs=0.4)
    for component, weight in zip(FEATURES, coefficients, strict=True):
        assert weight == pytest.approx(KNOWN.weights[component], abs=0.4), component


def test_a_fit_on_labels_from_a_known_model_beats_the_defaults() -> None:
    labels = drawn_from(KNOWN, 1500, seed=6)
    proposal = propose(labels, current=DEFAULT_WEIGHTS, seed=0)
    assert isinstance(proposal, Proposal)
    assert proposal.brier_fit < proposal.brier_current
    assert proposal.current_version == DEFAULT_WEIGHTS.version
    assert proposal.weights.version.startswith("fit-")
    # What the fit does to the escalations it must trade for is measured on the same labels.
    assert proposal.needless_fit is not None
    assert proposal.needless_current is not None
    # The same labels propose the same version: the split is seeded.
    again = propose(labels, current=DEFAULT_WEIGHTS, seed=0)
    assert isinstance(again, Proposal)
    assert again.weights.version == proposal.weights.version
    # The held-out share of right and of wrong labels is the same (a stratified split).
    train, held = split(labels, seed=0, share=0.3)
    assert len(train) + len(held) == len(labels)
    right_held = sum(1 for label in held if label.correct) / sum(1 for x in labels if x.correct)
    assert right_held == pytest.approx(0.3, abs=0.01)


def test_a_fit_that_does_not_beat_the_weights_in_use_is_refused() -> None:
    # The weights in use already tell right from wrong almost exactly; a fit held to finite
    # weights by its penalty cannot score a lower Brier on the held-out labels.
    sharp = ConfidenceWeights(version="sharp", intercept=-20.0, weights={Component.AGREEMENT: 40.0})
    rng = random.Random(2)
    labels = []
    for _ in range(200):
        agreement = float(rng.random() < 0.5)
        components = ConfidenceComponents(values={Component.AGREEMENT: agreement})
        labels.append(
            Label(
                kind=LabelKind.REVIEW,
                task_type="adr",
                correct=agreement == 1.0,
                confidence=sharp.score(components),
                components=components,
            )
        )
    outcome = propose(labels, current=sharp)
    assert isinstance(outcome, Refused)
    assert "not below" in outcome.reason
    assert "sharp" in outcome.reason
    assert outcome.brier_fit is not None
    assert outcome.brier_current is not None
    assert outcome.brier_fit > outcome.brier_current - MIN_GAIN


def test_a_fit_needs_right_and_wrong_labels_with_components() -> None:
    labels = [
        Label(kind=LabelKind.REVIEW, task_type="adr", correct=True, confidence=0.9)
        for _ in range(100)
    ]
    outcome = propose(labels, current=DEFAULT_WEIGHTS)
    assert isinstance(outcome, Refused)
    assert "there are 0 right and 0 wrong" in outcome.reason


def test_the_report_fits_only_task_types_with_enough_labels() -> None:
    labels = drawn_from(KNOWN, 120, seed=8, task_type="security") + drawn_from(
        KNOWN, 30, seed=9, task_type="contract"
    )
    feedback = Label(kind=LabelKind.FEEDBACK, task_type="security", correct=False, confidence=0.9)
    report = calibrate([*labels, feedback], current=DEFAULT_WEIGHTS, min_labels=50)
    assert report.fitted_task_types == ["security"]
    assert [f.group for f in report.by_task_type] == ["contract", "security"]
    assert report.overall.labels == 150
    assert report.feedback.labels == 1
    assert report.kinds[LabelKind.FEEDBACK] == 1
    assert not isinstance(report.fit, NotEnough)

    few = calibrate(labels, current=DEFAULT_WEIGHTS, min_labels=500)
    assert isinstance(few.fit, NotEnough)
    assert "needs 500 labels" in few.fit.reason
    assert "contract 30, security 120" in few.fit.reason


# --- what a verdict records, and sampling ------------------------------------------------------


def test_recorded_reads_the_components_and_version_a_verdict_stored() -> None:
    components, version = recorded(
        {"components": {"values": {"agreement": 0.5, "grounding": None}}, "weights_version": "v2"}
    )
    assert components is not None
    assert components.value(Component.AGREEMENT) == 0.5
    assert components.value(Component.GROUNDING) is None
    assert version == "v2"
    assert recorded({"confidence": 0.8}) == (None, None)


def test_the_review_sampler_draws_about_its_rate() -> None:
    assert not any(ReviewSampler(0.0).draw() for _ in range(100))
    assert all(ReviewSampler(1.0).draw() for _ in range(100))
    sampler = ReviewSampler(0.05, rng=random.Random(4))
    drawn = sum(sampler.draw() for _ in range(10_000))
    assert 400 <= drawn <= 600
    with pytest.raises(ValueError, match="sample rate"):
        ReviewSampler(1.5)


def test_the_sampled_share_is_raised_to_its_cap_while_samples_are_few() -> None:
    sampler = ReviewSampler(0.05, raised=0.2, goal=50)
    assert sampler.rate_for(0) == sampler.rate_for(49) == 0.2
    assert sampler.rate_for(50) == 0.05
    assert ReviewSampler(0.3, raised=0.2, goal=50).rate_for(0) == 0.3  # never lowered
    assert not any(ReviewSampler(0.0, raised=0.0, goal=50).draw(0) for _ in range(100))
    assert all(ReviewSampler(0.0, raised=1.0, goal=50).draw(3) for _ in range(100))
    note = sampling_note(sampler, 12)
    assert note is not None
    assert "20% of the verdicts that do not escalate" in note
    assert "12 of the 50 sampled reviews" in note
    assert sampling_note(sampler, 50) is None
