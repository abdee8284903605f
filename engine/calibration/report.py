"""Calibration figures per task type and overall, and the weights the labels propose: what
`debatebot calibration` prints and App Home shows to admins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.calibration.exchangeable import Exchangeable, exchangeable
from engine.calibration.fitting import Proposal, Refused, propose
from engine.calibration.guarantee import (
    DEFAULT_ALPHA,
    DEFAULT_DELTA,
    Outcome,
    Reading,
    guarantee,
)
from engine.calibration.labels import STRONG_KINDS, Label, LabelKind
from engine.calibration.metrics import (
    ECE_BINS,
    ReliabilityBin,
    auroc,
    brier,
    expected_calibration_error,
    reliability,
)
from engine.calibration.threshold import (
    DEFAULT_TARGET,
    ThresholdAdvice,
    recommend_threshold,
)
from engine.confidence import ConfidenceWeights

DEFAULT_MIN_LABELS = 50
"""Labels with components a task type needs before the fit covers it."""
OVERALL = "all"


@dataclass(frozen=True)
class Figures:
    """How well the recorded confidence of one group of labels predicted correctness."""

    group: str
    labels: int
    wrong: int
    sampled: int
    brier: float | None
    ece: float | None
    auroc: float | None
    advice: ThresholdAdvice | None
    bins: list[ReliabilityBin]
    basis: Exchangeable | None = None
    """The labels the guaranteed thresholds rest on (None for feedback: never guaranteed)."""
    guaranteed: dict[Reading, Outcome] | None = None
    """Each reading's guaranteed threshold, or why the labels support none."""


@dataclass(frozen=True)
class Guarantee:
    """What the guaranteed thresholds are computed with: the weights in use, the risk allowed
    and the chance the guarantee may fail, and the threshold a sampled review that recorded none
    was decided under."""

    weights: ConfidenceWeights
    alpha: float = DEFAULT_ALPHA
    delta: float = DEFAULT_DELTA
    default_threshold: float = 0.6


def guaranteed(basis: Exchangeable, terms: Guarantee) -> dict[Reading, Outcome]:
    """Both readings' guaranteed thresholds on `basis`."""
    return {
        reading: guarantee(
            basis.confidences,
            basis.correct,
            reading=reading,
            alpha=terms.alpha,
            delta=terms.delta,
            floor=basis.floor,
        )
        for reading in Reading
    }


def figures(
    labels: Sequence[Label],
    *,
    group: str,
    target: float = DEFAULT_TARGET,
    bins: int = ECE_BINS,
    terms: Guarantee | None = None,
) -> Figures:
    confidences = [label.confidence for label in labels]
    correct = [label.correct for label in labels]
    basis = (
        exchangeable(labels, weights=terms.weights, default_threshold=terms.default_threshold)
        if terms is not None
        else None
    )
    return Figures(
        group=group,
        labels=len(labels),
        wrong=sum(1 for y in correct if not y),
        sampled=sum(1 for label in labels if label.sampled),
        brier=brier(confidences, correct),
        ece=expected_calibration_error(confidences, correct, bins),
        auroc=auroc(confidences, correct),
        advice=recommend_threshold(confidences, correct, target),
        bins=reliability(confidences, correct, bins),
        basis=basis,
        guaranteed=guaranteed(basis, terms) if basis is not None and terms else None,
    )


@dataclass(frozen=True)
class NotEnough:
    """Too few labels to fit; `reason` says how many each task type has and needs."""

    reason: str


@dataclass(frozen=True)
class CalibrationReport:
    """The figures of the strong labels (reviews and evals) overall and per task type, those
    of the feedback apart, and the fit's outcome."""

    overall: Figures
    by_task_type: list[Figures]
    feedback: Figures
    kinds: dict[LabelKind, int]
    current: ConfidenceWeights
    fit: Proposal | Refused | NotEnough
    fitted_task_types: list[str]
    target: float
    """Share of wrong verdicts the recommended thresholds must escalate."""
    terms: Guarantee | None = None
    fit_guaranteed: dict[Reading, Outcome] | None = None
    """The proposed weights' own guaranteed thresholds, on the held-out eval labels (the only
    ones both unseen by the fit and drawn whatever the confidence)."""


def calibrate(
    labels: Sequence[Label],
    *,
    current: ConfidenceWeights,
    target: float = DEFAULT_TARGET,
    min_labels: int = DEFAULT_MIN_LABELS,
    bins: int = ECE_BINS,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    default_threshold: float = 0.6,
) -> CalibrationReport:
    """Figures, each with both readings' guaranteed thresholds under `current` at `alpha` and
    `delta`, and, where a task type has `min_labels` strong labels with components, a fit on
    those task types' labels, checked against `current`."""
    terms = Guarantee(
        weights=current, alpha=alpha, delta=delta, default_threshold=default_threshold
    )
    strong = [label for label in labels if label.kind in STRONG_KINDS]
    feedback = [label for label in labels if label.kind is LabelKind.FEEDBACK]
    task_types = sorted({label.task_type for label in strong})
    with_components = {
        task: [label for label in strong if label.task_type == task and label.components]
        for task in task_types
    }
    enough = [task for task in task_types if len(with_components[task]) >= min_labels]
    fit: Proposal | Refused | NotEnough
    if enough:
        fit = propose(
            [label for task in enough for label in with_components[task]],
            current=current,
            seed=seed,
            target=target,
        )
    else:
        counts = ", ".join(f"{task} {len(with_components[task])}" for task in task_types)
        fit = NotEnough(
            f"a fit needs {min_labels} labels with recorded components in a task type"
            f" (DEBATEBOT_CALIBRATION_MIN_LABELS); "
            + (f"there are: {counts}" if counts else "there are no review or eval labels yet")
        )
    kinds = {kind: sum(1 for label in labels if label.kind is kind) for kind in LabelKind}
    return CalibrationReport(
        overall=figures(strong, group=OVERALL, target=target, bins=bins, terms=terms),
        by_task_type=[
            figures(
                [label for label in strong if label.task_type == task],
                group=task,
                target=target,
                bins=bins,
                terms=terms,
            )
            for task in task_types
        ],
        feedback=figures(feedback, group=LabelKind.FEEDBACK.value, target=target, bins=bins),
        kinds=kinds,
        current=current,
        fit=fit,
        fitted_task_types=enough,
        target=target,
        terms=terms,
        fit_guaranteed=_fit_guaranteed(fit, terms),
    )


def _fit_guaranteed(
    fit: Proposal | Refused | NotEnough, terms: Guarantee
) -> dict[Reading, Outcome] | None:
    if not isinstance(fit, Proposal):
        return None
    evals = [label for label in fit.held_out_labels if label.kind is LabelKind.EVAL]
    basis = exchangeable(evals, weights=fit.weights, default_threshold=terms.default_threshold)
    return guaranteed(basis, replace(terms, weights=fit.weights))
