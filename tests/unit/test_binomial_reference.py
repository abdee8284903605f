"""The guarantee's binomial arithmetic (engine/calibration/binomial.py), written in pure Python,
against SciPy's on random data. SciPy is a dev-only dependency (the `dev` extra): the bot never
imports it, so this test is skipped where it is not installed."""

from __future__ import annotations

import random

import pytest

from engine.calibration.binomial import (
    binomial_cdf,
    clopper_pearson_upper,
    fewest_trials,
    rejects,
    trials_needed,
)

stats = pytest.importorskip("scipy.stats")


def _draws(seed: int, count: int) -> list[tuple[int, int, float]]:
    """(n, k, p): sizes from 1 to 5,000, any k, rates from 1e-4 to 0.9999."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.choice([rng.randint(1, 60), rng.randint(60, 600), rng.randint(600, 5000)])
        k = rng.randint(0, n) if rng.random() < 0.3 else min(n, int(rng.random() ** 3 * n))
        p = 10 ** rng.uniform(-4, -0.0001)
        out.append((n, k, p))
    return out


def test_the_binomial_cdf_matches_scipys() -> None:
    for n, k, p in _draws(1, 600):
        expected = float(stats.binom.cdf(k, n, p))
        assert binomial_cdf(k, n, p) == pytest.approx(expected, rel=1e-9, abs=1e-300), (n, k, p)


def test_the_clopper_pearson_bound_is_scipys_beta_quantile() -> None:
    rng = random.Random(2)
    for n, k, _ in _draws(2, 400):
        delta = rng.choice([0.01, 0.05, 0.1, 0.2, rng.uniform(0.001, 0.5)])
        expected = 1.0 if k == n else float(stats.beta.ppf(1 - delta, k + 1, n - k))
        assert clopper_pearson_upper(k, n, delta) == pytest.approx(expected, abs=1e-9), (n, k)


def test_the_test_rejects_exactly_when_scipys_binomial_test_does() -> None:
    rng = random.Random(3)
    checked = 0
    for n, k, _ in _draws(3, 600):
        alpha, delta = rng.choice([0.01, 0.05, 0.1, 0.2]), rng.choice([0.05, 0.1, 0.2])
        p_value = float(stats.binomtest(k, n, alpha, alternative="less").pvalue)
        if abs(p_value - delta) < 1e-9:
            continue  # on the boundary rounding decides; nothing to compare
        assert rejects(k, n, alpha, delta) is (p_value <= delta), (n, k, alpha, delta)
        checked += 1
    assert checked > 550


def test_the_fewest_trials_and_the_trials_needed_are_the_smallest_that_pass() -> None:
    for alpha in (0.01, 0.05, 0.1, 0.2):
        for delta in (0.05, 0.1, 0.2):
            least = fewest_trials(alpha, delta)
            assert stats.binom.cdf(0, least, alpha) <= delta < stats.binom.cdf(0, least - 1, alpha)
    for rate in (0.0, 0.01, 0.02, 0.03, 0.04):
        needed = trials_needed(rate, 0.05, 0.1)
        assert needed is not None
        assert stats.binomtest(int(rate * needed + 1e-9), needed, 0.05, "less").pvalue <= 0.1
    assert trials_needed(0.05, 0.05, 0.1) is None
