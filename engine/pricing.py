"""Token prices and the cost of a call; the budget ceiling is enforced on these numbers."""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine.models import Usage


class Pricing(BaseModel):
    """USD per million tokens. Cached input is billed at its own rate where a vendor offers one."""

    input_per_mtok: float = Field(default=0.0, ge=0.0)
    output_per_mtok: float = Field(default=0.0, ge=0.0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0.0)

    def cost(self, usage: Usage) -> float:
        """The USD cost of `usage`; cached input tokens are a subset of the input tokens."""
        cached_rate = (
            self.input_per_mtok
            if self.cached_input_per_mtok is None
            else self.cached_input_per_mtok
        )
        uncached = usage.input_tokens - usage.cached_input_tokens
        return (
            uncached * self.input_per_mtok
            + usage.cached_input_tokens * cached_rate
            + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000


FREE = Pricing()
