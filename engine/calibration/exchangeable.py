"""Which labels a guaranteed threshold may rest on, and the confidences it is computed from.

The guarantee holds for future verdicts only when the labels are drawn like them: eval labels
(every run of a case is labelled, whatever its confidence) and sampled reviews (a random share
of the verdicts that did not escalate). Reviews of escalated verdicts are drawn from the
doubted ones, biased toward low confidence: they serve the fit only.

The threshold applies to the confidence the weights in use give, so every label is scored by
them: an eval label with recorded components is rescored; a sampled review counts only when
those weights scored it (it was drawn among the verdicts their confidence did not escalate, a
set another version's confidence does not describe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.calibration.labels import Label, LabelKind
from engine.confidence import ConfidenceWeights


@dataclass(frozen=True)
class Exchangeable:
    """The labels' confidences under the weights in use and whether each verdict was right,
    the lowest threshold the sampled reviews allow (`floor`), and how many labels of each kind
    were used or left out."""

    confidences: list[float]
    correct: list[bool]
    floor: float
    sampled: int
    evals: int
    fit_only: int
    """Reviews of escalated verdicts: used for the fit, not for the guarantee."""
    other_weights: int
    """Sampled reviews scored by other weights, and eval labels without components scored by
    other weights: left out of the guarantee."""


def exchangeable(
    labels: Sequence[Label], *, weights: ConfidenceWeights, default_threshold: float
) -> Exchangeable:
    """The strong labels the guarantee may use. `default_threshold` stands for the threshold of
    a sampled review that recorded none (the deployment's)."""
    confidences: list[float] = []
    correct: list[bool] = []
    floor = 0.0
    sampled = evals = fit_only = other = 0
    for label in labels:
        if label.kind is LabelKind.EVAL:
            if label.components is not None:
                confidence = weights.score(label.components)
            elif label.weights_version == weights.version:
                confidence = label.confidence
            else:
                other += 1
                continue
            evals += 1
        elif label.kind is LabelKind.REVIEW and label.sampled:
            if label.weights_version != weights.version:
                other += 1
                continue
            confidence = label.confidence
            threshold = label.threshold if label.threshold is not None else default_threshold
            floor = max(floor, threshold)
            sampled += 1
        elif label.kind is LabelKind.REVIEW:
            fit_only += 1
            continue
        else:
            continue
        confidences.append(confidence)
        correct.append(label.correct)
    return Exchangeable(
        confidences=confidences,
        correct=correct,
        floor=floor,
        sampled=sampled,
        evals=evals,
        fit_only=fit_only,
        other_weights=other,
    )
