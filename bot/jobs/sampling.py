"""The review sampler and the calibration report the deployment's settings describe, and how
App Home says when the sampler is raised."""

from __future__ import annotations

from collections.abc import Sequence

from bot.settings import Settings
from engine.calibration.labels import Label
from engine.calibration.report import CalibrationReport, calibrate
from engine.calibration.sampling import ReviewSampler
from engine.confidence import ConfidenceWeights


def review_sampler(settings: Settings) -> ReviewSampler:
    """DEBATEBOT_REVIEW_SAMPLE_RATE, raised to DEBATEBOT_REVIEW_SAMPLE_MAX while a workspace
    has fewer than DEBATEBOT_CALIBRATION_MIN_LABELS sampled reviews."""
    return ReviewSampler(
        settings.review_sample_rate,
        raised=settings.review_sample_max,
        goal=settings.calibration_min_labels,
    )


def sampling_note(sampler: ReviewSampler, sampled: int) -> str | None:
    """What App Home says while the sampled share is raised; None when it is not."""
    if not sampler.is_raised(sampled):
        return None
    return (
        f"Sampling raised: {sampler.rate_for(sampled):.0%} of the verdicts that do not escalate"
        f" are sent for review (DEBATEBOT_REVIEW_SAMPLE_MAX), not {sampler.rate:.0%}, while this"
        f" workspace has {sampled} of the {sampler.goal} sampled reviews under the weights in use"
        " that a guaranteed threshold needs (DEBATEBOT_CALIBRATION_MIN_LABELS)."
    )


def calibration_report(
    labels: Sequence[Label],
    *,
    current: ConfidenceWeights,
    settings: Settings,
    alpha: float | None = None,
    delta: float | None = None,
) -> CalibrationReport:
    """The calibration report of `labels` under `current` at DEBATEBOT_CALIBRATION_TARGET,
    _MIN_LABELS, _ALPHA and _DELTA and the deployment's escalation threshold; `alpha` and
    `delta`, when given, instead of the settings' (the CLI's flags)."""
    return calibrate(
        labels,
        current=current,
        target=settings.calibration_target,
        min_labels=settings.calibration_min_labels,
        alpha=alpha or settings.calibration_alpha,
        delta=delta or settings.calibration_delta,
        default_threshold=settings.escalation_threshold,
    )
