"""The random share of verdicts that did not escalate and are sent for review anyway, so the
labels are not drawn only from verdicts already doubted."""

from __future__ import annotations

import random

DEFAULT_SAMPLE_RATE = 0.05


class ReviewSampler:
    """Draws, for each verdict that did not escalate, whether it is reviewed as a sample."""

    def __init__(self, rate: float = DEFAULT_SAMPLE_RATE, rng: random.Random | None = None):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"the review sample rate must be in [0, 1], got {rate}")
        self.rate = rate
        self._rng = rng or random.Random()

    def draw(self) -> bool:
        """True for about `rate` of the calls."""
        return self.rate > 0.0 and self._rng.random() < self.rate
