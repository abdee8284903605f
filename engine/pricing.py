"""Token prices and the cost of a call; the budget ceiling is enforced on these numbers.

Prices live in one data file, `engine/data/prices.json` (USD per million tokens, keyed
`provider:model`), which settings can replace or extend. A dated model name such as
`claude-sonnet-4-5-20250929` is priced by its longest listed prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import LLMError
from engine.models import Usage


class Pricing(BaseModel):
    """USD per million tokens. Cache reads and writes are billed at their own rates where a vendor
    has them; without a rate they cost what ordinary input costs."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(default=0.0, ge=0.0)
    output_per_mtok: float = Field(default=0.0, ge=0.0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0.0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0.0)

    def cost(self, usage: Usage) -> float:
        """The USD cost of `usage`; cache reads and writes are subsets of the input tokens."""
        read_rate = self.cached_input_per_mtok
        write_rate = self.cache_write_per_mtok
        if read_rate is None:
            read_rate = self.input_per_mtok
        if write_rate is None:
            write_rate = self.input_per_mtok
        uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens
        return (
            uncached * self.input_per_mtok
            + usage.cached_input_tokens * read_rate
            + usage.cache_write_input_tokens * write_rate
            + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000

    def worst_case(self, *, input_tokens: int, output_tokens: int) -> float:
        """The most `input_tokens` in and `output_tokens` out can cost: every input token at the
        dearest input rate (a cache write costs more than plain input), so no split into plain,
        cached and written input that a vendor reports can bill more."""
        input_rate = max(
            self.input_per_mtok, self.cached_input_per_mtok or 0.0, self.cache_write_per_mtok or 0.0
        )
        return (input_tokens * input_rate + output_tokens * self.output_per_mtok) / 1_000_000


FREE = Pricing()


class PricingError(LLMError):
    """A price table that cannot be read, or a paid model with no price to meter it by."""


class PriceTable:
    """Prices by `provider:model`, looked up exactly or by the longest listed prefix."""

    def __init__(self, prices: Mapping[str, Pricing]) -> None:
        self.prices = dict(prices)

    @classmethod
    def load(
        cls, path: Path | None = None, *, overrides: Mapping[str, Pricing] | None = None
    ) -> PriceTable:
        """The shipped table, or the file at `path` instead, with `overrides` on top."""
        try:
            if path is None:
                text = resources.files("engine.data").joinpath("prices.json").read_text("utf-8")
            else:
                text = path.read_text(encoding="utf-8")
            raw = json.loads(text)
            prices = {
                key: Pricing.model_validate(value)
                for key, value in raw.items()
                if not key.startswith("_")
            }
        except (OSError, ValueError, ValidationError) as error:
            where = path or "the shipped engine/data/prices.json"
            raise PricingError(
                f"cannot read the price table {where}: {error}. It must be a JSON object of"
                ' "provider:model": {"input_per_mtok": …, "output_per_mtok": …}'
            ) from error
        prices.update(overrides or {})
        return cls(prices)

    def find(self, provider: str, model: str) -> Pricing | None:
        """The price of `provider:model`, by exact name or the longest listed prefix."""
        key = f"{provider}:{model}"
        if key in self.prices:
            return self.prices[key]
        prefixes = [k for k in self.prices if key.startswith(k)]
        return self.prices[max(prefixes, key=len)] if prefixes else None

    def require(self, provider: str, model: str) -> Pricing:
        """The price of a paid model; without one the budget could not be kept, so refuse."""
        found = self.find(provider, model)
        if found is None:
            entry = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
            example = json.dumps({f"{provider}:{model}": entry})
            raise PricingError(
                f"no price is known for {provider}:{model}, so its cost and the budget ceiling"
                f" cannot be metered. Add it with DEBATEBOT_PRICES='{example}' (USD per million"
                " tokens) or in a DEBATEBOT_PRICES_FILE"
            )
        return found
