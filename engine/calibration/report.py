"""Calibration figures per task type and overall, and the weights the labels propose: what
`debatebot calibration` prints and App Home shows to admins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.calibration.fitting import Proposal, Refused, propose
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


def figures(
    labels: Sequence[Label], *, group: str, target: float = DEFAULT_TARGET, bins: int = ECE_BINS
) -> Figures:
    confidences = [label.confidence for label in labels]
    correct = [label.correct for label in labels]
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


def calibrate(
    labels: Sequence[Label],
    *,
    current: ConfidenceWeights,
    target: float = DEFAULT_TARGET,
    min_labels: int = DEFAULT_MIN_LABELS,
    bins: int = ECE_BINS,
    seed: int = 0,
) -> CalibrationReport:
    """Figures and, where a task type has `min_labels` strong labels with components, a fit
    on those task types' labels, checked against `current`."""
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
        overall=figures(strong, group=OVERALL, target=target, bins=bins),
        by_task_type=[
            figures(
                [label for label in strong if label.task_type == task],
                group=task,
                target=target,
                bins=bins,
            )
            for task in task_types
        ],
        feedback=figures(feedback, group=LabelKind.FEEDBACK.value, target=target, bins=bins),
        kinds=kinds,
        current=current,
        fit=fit,
        fitted_task_types=enough,
        target=target,
    )
