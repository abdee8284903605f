"""The review sampler the deployment's settings describe, and how App Home says when it is
raised."""

from __future__ import annotations

from bot.settings import Settings
from engine.calibration.sampling import ReviewSampler


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
