"""Exact binomial tails and the Clopper–Pearson upper bound, in pure Python (no SciPy at run
time): the arithmetic behind the guaranteed escalation threshold (`engine.calibration.guarantee`).

Written once here and checked against SciPy by `tests/unit/test_binomial_reference.py` (a dev-only
test: SciPy is in the `dev` extra, not a runtime dependency).
"""

from __future__ import annotations

import math

_BISECTIONS = 60
"""Halvings of [0, 1] when inverting the tail: 2^-60 is below a double's resolution there."""


_RESCALE = 1e250
"""When a running sum of terms (relative to one of them) passes this, it is scaled down and the
scale kept in log space, so no term overflows."""


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): the k + 1 terms summed exactly (up to rounding), from
    the k-th down, each from the one above by the ratio of consecutive probabilities, relative
    to the k-th, whose logarithm comes from log-gamma."""
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"a binomial needs n >= 0 and p in [0, 1], got n={n}, p={p}")
    if k < 0:
        return 0.0
    if k >= n or p == 0.0:
        return 1.0
    if p == 1.0:
        return 0.0
    odds = (1.0 - p) / p
    log_top = (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    total, term, log_scale = 1.0, 1.0, 0.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1) * odds
        total += term
        if total > _RESCALE:
            total /= _RESCALE
            term /= _RESCALE
            log_scale += math.log(_RESCALE)
        elif term < total * 1e-17:
            break  # the rest cannot change the sum in double precision
    return min(1.0, math.exp(log_top + log_scale + math.log(total)))


def clopper_pearson_upper(k: int, n: int, delta: float) -> float:
    """The exact one-sided upper confidence bound, at level 1 - delta, on a binomial rate
    after k events in n trials: the rate u with P(X <= k; n, u) = delta (1 when k = n or n = 0).
    It equals the (1 - delta) quantile of Beta(k + 1, n - k)."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n], got k={k}, n={n}")
    if k == n:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if binomial_cdf(k, n, middle) > delta:
            low = middle
        else:
            high = middle
    return high


def rejects(k: int, n: int, alpha: float, delta: float) -> bool:
    """Whether k events in n trials show, at level delta, that the rate is at most alpha: the
    exact binomial p-value P(X <= k; n, alpha) is at most delta, which is the same as the
    Clopper–Pearson upper bound being at most alpha."""
    return n > 0 and binomial_cdf(k, n, alpha) <= delta


def fewest_trials(alpha: float, delta: float) -> int:
    """The fewest trials in which even zero events can show a rate of at most alpha at level
    delta: the smallest n with (1 - alpha)^n <= delta."""
    return max(1, math.ceil(math.log(delta) / math.log1p(-alpha) - 1e-12))


def trials_needed(
    rate: float, alpha: float, delta: float, *, limit: int = 10_000_000
) -> int | None:
    """The fewest trials n at which an observed rate of `rate` (floor(rate * n) events) shows,
    at level delta, a rate of at most alpha; None when rate >= alpha (no number suffices) or
    more than `limit` would be needed."""
    if rate >= alpha:
        return None

    def enough(n: int) -> bool:
        return rejects(math.floor(rate * n + 1e-9), n, alpha, delta)

    high = fewest_trials(alpha, delta)
    while not enough(high):
        high *= 2
        if high > limit:
            return None
    low = high // 2
    # The test is not exactly monotone in n (the floor), so the bisection answers a count that
    # suffices and is within a few trials of the fewest.
    while low + 1 < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high
