"""The random share of verdicts that did not escalate and are sent for review anyway, so the
labels are not drawn only from verdicts already doubted. Only these sampled reviews (and eval
labels) can carry a guaranteed threshold, so while a workspace has too few of them the share
is raised, up to a cap."""

from __future__ import annotations

import random

DEFAULT_SAMPLE_RATE = 0.05


class ReviewSampler:
    """Draws, for each verdict that did not escalate, whether it is reviewed as a sample: at
    `rate`, or at `raised` (when higher) while the workspace has fewer than `goal` sampled
    reviews."""

    def __init__(
        self,
        rate: float = DEFAULT_SAMPLE_RATE,
        rng: random.Random | None = None,
        *,
        raised: float = 0.0,
        goal: int = 0,
    ):
        for name, value in (("review sample rate", rate), ("raised review sample rate", raised)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"the {name} must be in [0, 1], got {value}")
        self.rate = rate
        self.raised = raised
        self.goal = goal
        self._rng = rng or random.Random()

    def rate_for(self, sampled: int) -> float:
        """The share drawn in a workspace that has `sampled` sampled reviews."""
        return max(self.rate, self.raised) if sampled < self.goal else self.rate

    def is_raised(self, sampled: int) -> bool:
        return self.rate_for(sampled) > self.rate

    def draw(self, sampled: int | None = None) -> bool:
        """True for about `rate_for(sampled)` of the calls (`rate` when the count is unknown)."""
        rate = self.rate if sampled is None else self.rate_for(sampled)
        return rate > 0.0 and self._rng.random() < rate
