"""Token prices and the cost of a call; the budget ceiling is enforced on these numbers.

The prices of hosted models are entries of the model catalogue (`engine/catalog.py`); a
deployment adds or overrides them with a prices file or `DEBATEBOT_PRICES`, read here.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import LLMError
from engine.models import Usage


class LongContext(BaseModel):
    """A price tier for long prompts: past `above_input_tokens` input tokens the whole request is
    billed at the factors (Claude Haiku 5.5 above 100K, OpenAI's GPT-6 models above 272K)."""

    model_config = ConfigDict(extra="forbid")

    above_input_tokens: int = Field(gt=0)
    input_factor: float = Field(ge=1.0)
    output_factor: float = Field(ge=1.0)


class Pricing(BaseModel):
    """USD per million tokens. Cache reads and writes are billed at their own rates where a vendor
    has them; without a rate they cost what ordinary input costs. Thinking (reasoning) tokens
    are output tokens, billed at the output rate unless `reasoning_per_mtok` says otherwise."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(default=0.0, ge=0.0)
    output_per_mtok: float = Field(default=0.0, ge=0.0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0.0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0.0)
    reasoning_per_mtok: float | None = Field(default=None, ge=0.0)
    long_context: LongContext | None = None

    def _factors(self, input_tokens: int) -> tuple[float, float]:
        tier = self.long_context
        if tier is not None and input_tokens > tier.above_input_tokens:
            return tier.input_factor, tier.output_factor
        return 1.0, 1.0

    def cost(self, usage: Usage) -> float:
        """The USD cost of `usage`; cache reads and writes are subsets of the input tokens, the
        reasoning tokens a subset of the output tokens."""
        read_rate = self.cached_input_per_mtok
        write_rate = self.cache_write_per_mtok
        if read_rate is None:
            read_rate = self.input_per_mtok
        if write_rate is None:
            write_rate = self.input_per_mtok
        reasoning_rate = self.reasoning_per_mtok
        if reasoning_rate is None:
            reasoning_rate = self.output_per_mtok
        in_factor, out_factor = self._factors(usage.input_tokens)
        uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens
        reasoning = min(usage.reasoning_tokens, usage.output_tokens)
        return (
            in_factor
            * (
                uncached * self.input_per_mtok
                + usage.cached_input_tokens * read_rate
                + usage.cache_write_input_tokens * write_rate
            )
            + out_factor
            * (
                (usage.output_tokens - reasoning) * self.output_per_mtok
                + reasoning * reasoning_rate
            )
        ) / 1_000_000

    def worst_case(self, *, input_tokens: int, output_tokens: int) -> float:
        """The most `input_tokens` in and `output_tokens` out can cost: every input token at the
        dearest input rate (a cache write costs more than plain input), every output token at the
        dearer of the output and reasoning rates, and the long-prompt tier when the input could
        reach it, so no split a vendor reports can bill more."""
        input_rate = max(
            self.input_per_mtok, self.cached_input_per_mtok or 0.0, self.cache_write_per_mtok or 0.0
        )
        output_rate = max(self.output_per_mtok, self.reasoning_per_mtok or 0.0)
        in_factor, out_factor = self._factors(input_tokens)
        return (
            in_factor * input_tokens * input_rate + out_factor * output_tokens * output_rate
        ) / 1_000_000


FREE = Pricing()


class PricingError(LLMError):
    """A prices file that cannot be read, or a paid model with no price to meter it by."""


def read_prices(path: Path) -> dict[str, Pricing]:
    """A prices file: a JSON object of `"provider:model": {"input_per_mtok": …, …}` (keys that
    start with `_` are comments)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {
            key: Pricing.model_validate(value)
            for key, value in raw.items()
            if not key.startswith("_")
        }
    except (OSError, ValueError, AttributeError, ValidationError) as error:
        raise PricingError(
            f"cannot read the prices file {path}: {error}. It must be a JSON object of"
            ' "provider:model": {"input_per_mtok": …, "output_per_mtok": …}'
        ) from error


def missing_price(provider: str, model: str) -> PricingError:
    """The refusal of a paid model with no price, saying how to give it one."""
    entry = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
    example = json.dumps({f"{provider}:{model}": entry})
    return PricingError(
        f"no price is known for {provider}:{model}, so its cost and the budget ceiling"
        f" cannot be metered. Add it with DEBATEBOT_PRICES='{example}' (USD per million"
        " tokens), in a DEBATEBOT_PRICES_FILE, or as an entry of a DEBATEBOT_MODELS_FILE"
    )
