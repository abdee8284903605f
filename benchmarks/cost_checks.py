"""Two checks of `benchmarks/cost.py` on every scenario it runs (issue 47 items 4 and 5):

- caching ÷ none: the vendor bill under its documented cache rules ÷ the same calls billed with
  no cache at all (every input token at the plain input rate). Above 1, the debate writes cache
  entries no later call reads, at 1.25× the input price (Anthropic), and caching costs money;
- bound ÷ actual: for each call, the input tokens the budget's bound allowed before the call
  (`CostMeter.hold`, what the ledger checked) ÷ the input tokens the stand-in reported for it.
  The stand-ins count UTF-8 bytes / 4 (no vendor tokenizer runs offline), so "actual" is that
  count, not a vendor's. A call whose prompt extends an earlier one on its model in the debate
  is bounded from that call's report (`engine/bound.py`); the first call per model has only
  the byte bound, about 4× such a count, and is shown apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from unittest.mock import patch

from benchmarks.vendor_cache import Bill, Call, charge
from engine.ledger import CallBound, CostMeter
from engine.pricing import Pricing

GOAL_CACHE = 1.0
GOAL_BOUND = 1.5

BOUND: ContextVar[int | None] = ContextVar("cost_benchmark_bound", default=None)
"""The input bound of the call the ledger just held, read by the recording provider it calls
next in the same task (the ledger holds the bound, then calls the provider, with no await
between)."""


@contextmanager
def bounds_watched() -> Iterator[None]:
    """Within it, every bound the ledger holds is left in `BOUND` for the recorder."""
    original = CostMeter.hold

    def hold(meter: CostMeter, call: CallBound) -> int:
        BOUND.set(call.input_tokens)
        return original(meter, call)

    with patch.object(CostMeter, "hold", hold):
        yield


def uncached_usd(
    calls: Sequence[Call], bills: Sequence[Bill], price: Callable[[Call], Pricing]
) -> float:
    """What `calls` would cost with no cache: their input all at the plain rate."""
    return sum(
        charge(
            price(call), input_tokens=bill.input_tokens, read=0, write=0, output=bill.output_tokens
        ).usd
        for call, bill in zip(calls, bills, strict=True)
    )


@dataclass(frozen=True)
class BoundRatio:
    """One call's bound ÷ the input tokens reported, and whether an earlier call on its model
    in the same debate could tighten it."""

    model: str
    ratio: float
    first: bool


def bound_ratios(calls: Sequence[tuple[str, int | None, int]]) -> list[BoundRatio]:
    """(model, bound, reported input tokens) of a debate's calls in order → their ratios."""
    seen: set[str] = set()
    ratios = []
    for model, bound, reported in calls:
        if bound is None or reported <= 0:
            continue
        ratios.append(BoundRatio(model, bound / reported, model not in seen))
        seen.add(model)
    return ratios


def summary(ratios: Sequence[BoundRatio], *, first: bool) -> str:
    """`median/max` of the ratios of first (or later) calls, or `-` when there are none."""
    chosen = [r.ratio for r in ratios if r.first == first]
    if not chosen:
        return "-"
    return f"{statistics.median(chosen):.2f}/{max(chosen):.2f}"
