"""The calibration fit (engine/calibration/fitting.py), written in pure Python, against SciPy on
random data: the ridge logistic regression against `scipy.optimize.minimize` on the same
penalised likelihood, and the pool-adjacent-violators blocks against
`scipy.optimize.isotonic_regression`. SciPy is a dev-only dependency (the `dev` extra), as in
test_binomial_reference.py: the bot never imports it, so this test is skipped where it is not
installed."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from engine.calibration.fitting import RIDGE, fit_isotonic, fit_logistic

optimize = pytest.importorskip("scipy.optimize")
np = pytest.importorskip("numpy")


def _labels(seed: int) -> tuple[list[list[float]], list[bool]]:
    """Rows of 1 to 6 features in [0, 1] and outcomes drawn from a logistic model."""
    rng = random.Random(seed)
    width = rng.randint(1, 6)
    truth = [rng.uniform(-4, 4) for _ in range(width + 1)]
    rows = [[rng.random() for _ in range(width)] for _ in range(rng.randint(20, 400))]
    correct = []
    for row in rows:
        z = truth[0] + sum(w * x for w, x in zip(truth[1:], row, strict=True))
        correct.append(rng.random() < 1 / (1 + math.exp(-z)))
    return rows, correct


def _reference_logistic(rows: list[list[float]], correct: list[bool], ridge: float) -> list[float]:
    """The minimiser of the same penalised negative log-likelihood (the intercept unpenalised),
    by SciPy's BFGS with its exact gradient."""
    x = np.hstack([np.ones((len(rows), 1)), np.array(rows)])
    y = np.array([1.0 if c else 0.0 for c in correct])
    penalised = np.ones(x.shape[1])
    penalised[0] = 0.0

    def loss(beta: Any) -> tuple[float, Any]:
        z = x @ beta
        value = np.sum(np.logaddexp(0.0, z) - y * z) + ridge / 2 * np.sum(penalised * beta**2)
        gradient = x.T @ (1 / (1 + np.exp(-z)) - y) + ridge * penalised * beta
        return float(value), gradient

    found = optimize.minimize(
        loss, np.zeros(x.shape[1]), jac=True, method="BFGS", options={"gtol": 1e-10}
    )
    return [float(b) for b in found.x]


@pytest.mark.parametrize("seed", range(12))
def test_the_logistic_fit_is_scipys_minimiser(seed: int) -> None:
    rows, correct = _labels(seed)
    ridge = RIDGE if seed % 3 else 0.1
    intercept, weights = fit_logistic(rows, correct, ridge=ridge)
    expected = _reference_logistic(rows, correct, ridge)
    assert [intercept, *weights] == pytest.approx(expected, abs=1e-5), (seed, len(rows))


@pytest.mark.parametrize("seed", range(12))
def test_the_isotonic_blocks_are_scipys(seed: int) -> None:
    """Each knot of the map is one block of SciPy's isotonic regression (adjacent blocks of
    equal value taken as one): the block's mean score and its share of right verdicts."""
    rng = random.Random(100 + seed)
    scores = [rng.random() for _ in range(rng.randint(5, 300))]
    correct = [rng.random() < 0.2 + 0.7 * s for s in scores]
    mapping = fit_isotonic(scores, correct)

    pairs = sorted(zip(scores, correct, strict=True), key=lambda pair: pair[0])
    fitted = optimize.isotonic_regression(np.array([float(c) for _, c in pairs])).x
    knots: list[tuple[float, float]] = []  # (mean score, share right) per merged block
    start = 0
    for end in range(1, len(pairs) + 1):
        if end == len(pairs) or not math.isclose(fitted[end], fitted[start], abs_tol=1e-12):
            block = pairs[start:end]
            knots.append((sum(s for s, _ in block) / len(block), float(fitted[start])))
            start = end
    assert (mapping.xs[0], mapping.xs[-1], mapping.ys[0], mapping.ys[-1]) == (0.0, 1.0, 0.0, 1.0)
    assert mapping.xs[1:-1] == pytest.approx([x for x, _ in knots])
    assert mapping.ys[1:-1] == pytest.approx([y for _, y in knots])
