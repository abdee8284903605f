"""Fitting confidence weights on labels: a logistic regression on the components (Newton's
method), optionally followed by an isotonic map (pool-adjacent-violators), kept only when it
beats the current weights' Brier score on labels it was not fitted on.

The split is seeded and stratified (the same share of right and wrong verdicts held out), so
the same labels always give the same proposal and version. The proposal is the fit that was
checked: it is not refitted on the held-out labels afterwards.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.calibration.labels import Label
from engine.calibration.metrics import brier
from engine.calibration.threshold import DEFAULT_TARGET, recommend_threshold
from engine.confidence import Component, ConfidenceComponents, ConfidenceWeights, IsotonicMap

RIDGE = 1.0
"""L2 penalty on the weights (not the intercept): keeps a fit on a few dozen labels, or on a
component that never varies among them, finite and near zero instead of diverging."""
HOLDOUT_SHARE = 0.3
MIN_GAIN = 0.001
"""How much lower than the current weights' the fit's held-out Brier score must be: a smaller
gain is below what a few hundred held-out labels can tell apart, and adopting it would only
make a new version."""
MIN_EACH = 5
"""Right and wrong verdicts a fit needs at least, each, so both sides of the split hold some."""
FEATURES = tuple(Component)
_MAX_ITERATIONS = 100
_TOLERANCE = 1e-9


class FitError(ValueError):
    """The labels cannot be fitted (a singular system); the message says why."""


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _loss(
    rows: Sequence[Sequence[float]], ys: Sequence[float], beta: Sequence[float], ridge: float
) -> float:
    """The penalised negative log-likelihood."""
    total = ridge / 2 * sum(b * b for b in beta[1:])
    for row, y in zip(rows, ys, strict=True):
        z = sum(b * x for b, x in zip(beta, row, strict=True))
        # log(1 + e^z) - y z, computed without overflow.
        total += (z if z > 0 else 0.0) + math.log1p(math.exp(-abs(z))) - y * z
    return total


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting; the system is a handful of unknowns."""
    n = len(vector)
    a = [[*row, v] for row, v in zip(matrix, vector, strict=True)]
    for column in range(n):
        pivot = max(range(column, n), key=lambda r: abs(a[r][column]))
        if abs(a[pivot][column]) < 1e-12:
            raise FitError("the labels' components leave the fit undetermined")
        a[column], a[pivot] = a[pivot], a[column]
        for r in range(column + 1, n):
            factor = a[r][column] / a[column][column]
            for c in range(column, n + 1):
                a[r][c] -= factor * a[column][c]
    solution = [0.0] * n
    for r in range(n - 1, -1, -1):
        solution[r] = (a[r][n] - sum(a[r][c] * solution[c] for c in range(r + 1, n))) / a[r][r]
    return solution


def fit_logistic(
    features: Sequence[Sequence[float]], correct: Sequence[bool], *, ridge: float = RIDGE
) -> tuple[float, list[float]]:
    """(intercept, weights) minimising the penalised negative log-likelihood of `correct`
    given `features` (one row per label), by Newton's method with step halving."""
    if not features:
        raise FitError("there are no labels to fit")
    rows = [[1.0, *map(float, row)] for row in features]
    ys = [1.0 if y else 0.0 for y in correct]
    width = len(rows[0])
    beta = [0.0] * width

    def loss(b: Sequence[float]) -> float:
        return _loss(rows, ys, b, ridge)

    current = loss(beta)
    for _ in range(_MAX_ITERATIONS):
        gradient = [ridge * b if j else 0.0 for j, b in enumerate(beta)]
        hessian = [[ridge if i == j and i else 0.0 for j in range(width)] for i in range(width)]
        for row, y in zip(rows, ys, strict=True):
            p = _sigmoid(sum(b * x for b, x in zip(beta, row, strict=True)))
            w = p * (1 - p)
            for i in range(width):
                gradient[i] += (p - y) * row[i]
                for j in range(i, width):
                    hessian[i][j] += w * row[i] * row[j]
        for i in range(width):
            for j in range(i):
                hessian[i][j] = hessian[j][i]
        step = _solve(hessian, gradient)
        scale = 1.0
        while True:
            candidate = [b - scale * s for b, s in zip(beta, step, strict=True)]
            value = loss(candidate)
            if value <= current or scale < 1e-6:
                break
            scale /= 2
        moved = max(abs(scale * s) for s in step)
        beta, current = candidate, value
        if moved < _TOLERANCE:
            break
    return beta[0], beta[1:]


def fit_isotonic(scores: Sequence[float], correct: Sequence[bool]) -> IsotonicMap:
    """The non-decreasing map from score to the share of right verdicts, by
    pool-adjacent-violators, centred: each pooled block is one knot at its mean score and its
    share of right verdicts, joined by straight lines and anchored at (0, 0) and (1, 1). The
    plain isotonic fit is flat across each block, which ties every verdict in it; an escalation
    threshold then has to take a whole block to catch one wrong verdict in it. Centred, the map
    rises between knots, so distinct scores keep their order."""
    if not scores:
        raise FitError("there are no labels to fit")
    pairs = sorted(zip(scores, correct, strict=True), key=lambda pair: pair[0])
    # Blocks of (right verdicts, verdicts, sum of scores); a block never has a share at or above
    # the next one's, so the knots rise.
    blocks: list[list[float]] = []
    for score, right in pairs:
        blocks.append([float(right), 1.0, score])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total, count, summed = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
            blocks[-1][2] += summed
    xs = [0.0, *(summed / count for _, count, summed in blocks), 1.0]
    ys = [0.0, *(total / count for total, count, _ in blocks), 1.0]
    return IsotonicMap(xs=xs, ys=ys)


def feature_row(components: ConfidenceComponents, neutral: dict[Component, float]) -> list[float]:
    """A label's features in `FEATURES` order: each component's value, or its neutral value
    when it was not measured (as scoring does)."""
    row = []
    for component in FEATURES:
        value = components.value(component)
        row.append(value if value is not None else neutral.get(component, 0.0))
    return row


@dataclass(frozen=True)
class Proposal:
    """Fitted weights that beat the current ones on the held-out labels."""

    weights: ConfidenceWeights
    method: str
    trained_on: int
    held_out: int
    brier_fit: float
    brier_current: float
    current_version: str
    needless_fit: float | None = None
    """On the held-out labels: the share of right verdicts escalated needlessly by the lowest
    threshold that catches the target share of wrong ones, with the fitted weights. A fit
    chosen for its Brier score (an average) can rank the few most confident wrong verdicts
    worse than the weights in use, and those decide this figure; the admin sees both."""
    needless_current: float | None = None
    """The same with the weights in use."""
    evidence: dict[str, object] = field(default_factory=dict)
    held_out_labels: list[Label] = field(default_factory=list)
    """The labels the fit never saw: the only ones its own guaranteed threshold may rest on."""


@dataclass(frozen=True)
class Refused:
    """Why no weights are proposed."""

    reason: str
    brier_fit: float | None = None
    brier_current: float | None = None


def split(labels: Sequence[Label], seed: int, share: float) -> tuple[list[Label], list[Label]]:
    """(train, held out): `share` of the right and of the wrong labels held out, each side
    shuffled with `seed`."""
    rng = random.Random(seed)
    train: list[Label] = []
    held: list[Label] = []
    for outcome in (True, False):
        side = [label for label in labels if label.correct is outcome]
        rng.shuffle(side)
        cut = max(1, round(len(side) * share))
        held += side[:cut]
        train += side[cut:]
    return train, held


def version_of(weights: ConfidenceWeights) -> str:
    """A version named after the weights' content, so fitting the same labels again proposes
    the same version."""
    content = weights.model_dump(mode="json", include={"intercept", "weights", "neutral"})
    content["isotonic"] = weights.isotonic.model_dump() if weights.isotonic else None
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return f"fit-{digest[:10]}"


def propose(
    labels: Sequence[Label],
    *,
    current: ConfidenceWeights,
    seed: int = 0,
    holdout: float = HOLDOUT_SHARE,
    target: float = DEFAULT_TARGET,
) -> Proposal | Refused:
    """Fit weights on `labels` (those with components) and propose them when, on the held-out
    part, the better of the logistic fit and the logistic fit followed by an isotonic map has
    a Brier score lower by `MIN_GAIN` than `current` rescoring the same labels. Refused
    otherwise, saying why."""
    usable = [label for label in labels if label.components is not None]
    right = sum(1 for label in usable if label.correct)
    wrong = len(usable) - right
    if right < MIN_EACH or wrong < MIN_EACH:
        return Refused(
            f"a fit needs at least {MIN_EACH} right and {MIN_EACH} wrong verdicts among the"
            f" labels that recorded their components; there are {right} right and {wrong} wrong"
        )
    train, held = split(usable, seed, holdout)
    neutral = {c: current.neutral.get(c, 0.0) for c in FEATURES}

    def rows(part: Sequence[Label]) -> list[list[float]]:
        return [feature_row(label.components, neutral) for label in part if label.components]

    try:
        intercept, coefficients = fit_logistic(rows(train), [label.correct for label in train])
    except FitError as error:
        return Refused(f"the fit failed: {error}")
    logistic = ConfidenceWeights(
        version="",
        intercept=intercept,
        weights=dict(zip(FEATURES, coefficients, strict=True)),
        neutral=neutral,
    )
    train_scores = [logistic.score(label.components) for label in train if label.components]
    isotonic = logistic.model_copy(
        update={"isotonic": fit_isotonic(train_scores, [label.correct for label in train])}
    )
    outcomes = [label.correct for label in held]

    def held_scores(weights: ConfidenceWeights) -> list[float]:
        return [weights.score(label.components) for label in held if label.components]

    def held_brier(weights: ConfidenceWeights) -> float:
        value = brier(held_scores(weights), outcomes)
        assert value is not None  # the split holds out at least one label of each side
        return value

    def needless(weights: ConfidenceWeights) -> float | None:
        advice = recommend_threshold(held_scores(weights), outcomes, target)
        return advice.counts.needless_share if advice is not None else None

    baseline = held_brier(current)
    candidates = {"logistic": logistic, "logistic+isotonic": isotonic}
    method = min(candidates, key=lambda name: held_brier(candidates[name]))
    best = held_brier(candidates[method])
    if best > baseline - MIN_GAIN:
        return Refused(
            f"the fit ({method}) scores a held-out Brier of {best:.4f}, not below the"
            f" {baseline:.4f} of the current weights ({current.version}) by {MIN_GAIN} on the"
            f" same {len(held)} labels; the current weights stay",
            brier_fit=best,
            brier_current=baseline,
        )
    chosen = candidates[method]
    named = chosen.model_copy(
        update={
            "version": version_of(chosen),
            "source": (
                f"{method} fit on {len(train)} labels; held-out Brier {best:.4f} against"
                f" {baseline:.4f} of {current.version} on {len(held)} labels (seed {seed})"
            ),
        }
    )
    return Proposal(
        weights=named,
        method=method,
        trained_on=len(train),
        held_out=len(held),
        brier_fit=best,
        brier_current=baseline,
        current_version=current.version,
        needless_fit=needless(chosen),
        needless_current=needless(current),
        evidence={"seed": seed, "holdout_share": holdout},
        held_out_labels=held,
    )
