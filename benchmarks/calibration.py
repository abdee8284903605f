"""How well three confidences predict a right verdict in a synthetic world where the truth is
known, and what the recommended escalation threshold does with each (issue 36). In one run,
with no model.

The world: `--verdicts` cases (1,000), each with an expected verdict and an accuracy of its
own, drawn from three kinds of case: 60 % easy (accuracy 0.85 to 0.98), 30 % middling (0.55 to
0.85), 10 % hard (0.20 to 0.55). A fake model that knows the expected verdict answers it with
the case's accuracy; otherwise it falls into the case's trap (a plausible wrong decision, 70 %
of its mistakes) or another wrong one. The independent judge (the default: one) and the same
judge on the transcript with the sides swapped err in the same way, so they share the model's
blind spot on a trap, as judges copy each other's.

The engine is not run 1,000 times: the components are drawn from this generative model, as
the evidence-based scoring would compute them from such a transcript:
- agreement: 1 when the judge reaches the verdict's decision, else 0;
- position_bias: 1 when the judge on the swapped transcript decides otherwise than the judge;
- grounding: of 1 to 5 cited quotes (none in 10 % of debates: not measured), each found in the
  context with probability 0.95 after a right verdict, 0.75 after a wrong one;
- unanswered: the share of 3 to 6 objections left unanswered, each with probability 0.2 after a
  right verdict and 0.45 after a wrong one;
- output_checks: degenerate-output findings (each with probability 0.03 after a right verdict,
  0.10 after a wrong one, up to three), as min(1, findings / 3);
- declared: the moderator's level, overconfident as in the evidence the issue cites: HIGH 88 %
  of the time after a right verdict and 80 % after a wrong one, MODERATE most of the rest.

The three confidences:
- (a) today's: the moderator's level (HIGH 0.85, MODERATE 0.60, LOW 0.35) minus the adversarial
  protocol's penalties (0.10 per quote not found, capped at 0.30; 0.02 per unresolved point,
  capped at 0.10; 0.10 for a weak challenge, in 15 % of debates) and the output checks' (0.15
  to 0.30 per finding), with the constants the engine had then;
- (b) the evidence-based default weights (`engine.confidence.DEFAULT_WEIGHTS`);
- (c) weights fitted (`engine.calibration.fitting.propose`) on the labels of a seeded half of
  the verdicts, as reviews would give them.

Every figure is measured on the other half, which the fit never saw; the threshold each
confidence gets is the one `recommend_threshold` picks on the fitting half (at least 95 % of
the wrong verdicts to people), then applied to the evaluation half. Today's fixed threshold
(0.6) on today's confidence is shown beside. The reliability diagrams go to `--out`:
`before.png` (today's and the defaults') and `after.png` (the fitted weights'), with the same
bins printed as a table.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.calibration [--verdicts 1000] [--seed 7]
        [--out calibration-bench]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.cli.reliability_chart import write_reliability_png
from engine.calibration.fitting import Proposal, propose
from engine.calibration.labels import Label, LabelKind
from engine.calibration.metrics import (
    ReliabilityBin,
    auroc,
    brier,
    expected_calibration_error,
    reliability,
)
from engine.calibration.threshold import (
    DEFAULT_TARGET,
    EscalationCounts,
    escalation_at,
    recommend_threshold,
)
from engine.confidence import DEFAULT_WEIGHTS, Component, ConfidenceComponents
from engine.models import ConfidenceLevel, Decision
from engine.protocols.base import LEVEL_BASE

DECISIONS = [d for d in Decision if d is not Decision.ESCALATE]
KINDS = ((0.6, 0.85, 0.98), (0.3, 0.55, 0.85), (0.1, 0.20, 0.55))
"""(share of cases, lowest accuracy, highest accuracy) of easy, middling and hard cases."""
TRAP_SHARE = 0.7
TODAYS_THRESHOLD = 0.6
# The method before the evidence-based confidence (the engine no longer has these constants):
# the adversarial protocol's penalties and the output checks', as they were.
FABRICATION_PENALTY = 0.10
FABRICATION_PENALTY_CAP = 0.30
WEAK_CHALLENGE_PENALTY = 0.10
UNRESOLVED_PENALTY = 0.02
UNRESOLVED_PENALTY_CAP = 0.10
REPETITION_PENALTY = 0.15
BARE_PENALTY = 0.30
ECHO_PENALTY = 0.20
CONTRADICTION_PENALTY = 0.25
DECLARED_VALUE = {
    ConfidenceLevel.LOW: 0.0,
    ConfidenceLevel.MODERATE: 0.5,
    ConfidenceLevel.HIGH: 1.0,
}
OUTPUT_PENALTIES = (REPETITION_PENALTY, BARE_PENALTY, ECHO_PENALTY, CONTRADICTION_PENALTY)


@dataclass(frozen=True)
class Case:
    expected: Decision
    trap: Decision
    accuracy: float


@dataclass(frozen=True)
class Verdict:
    """One synthetic verdict: whether it is right, its components, and today's confidence."""

    correct: bool
    components: ConfidenceComponents
    today: float


def draw_case(rng: random.Random) -> Case:
    roll, accuracy = rng.random(), 0.0
    for share, low, high in KINDS:
        if roll < share:
            accuracy = rng.uniform(low, high)
            break
        roll -= share
    expected = rng.choice(DECISIONS)
    trap = rng.choice([d for d in DECISIONS if d is not expected])
    return Case(expected=expected, trap=trap, accuracy=accuracy)


def answer(case: Case, rng: random.Random) -> Decision:
    """What the fake model (or a judge) decides: the expected verdict with the case's
    accuracy, else mostly the case's trap."""
    if rng.random() < case.accuracy:
        return case.expected
    if rng.random() < TRAP_SHARE:
        return case.trap
    return rng.choice([d for d in DECISIONS if d not in (case.expected, case.trap)])


def debate(case: Case, rng: random.Random) -> Verdict:
    decision = answer(case, rng)
    correct = decision is case.expected
    judge, swapped = answer(case, rng), answer(case, rng)
    quotes = 0 if rng.random() < 0.1 else rng.randint(1, 5)
    found = sum(1 for _ in range(quotes) if rng.random() < (0.95 if correct else 0.75))
    objections = rng.randint(3, 6)
    unanswered = sum(1 for _ in range(objections) if rng.random() < (0.2 if correct else 0.45))
    findings = sum(1 for _ in range(3) if rng.random() < (0.03 if correct else 0.10))
    level_roll = rng.random()
    high = 0.88 if correct else 0.80
    declared = (
        ConfidenceLevel.HIGH
        if level_roll < high
        else ConfidenceLevel.MODERATE
        if level_roll < high + (1 - high) * 0.75
        else ConfidenceLevel.LOW
    )
    components = ConfidenceComponents(
        values={
            Component.AGREEMENT: 1.0 if judge is decision else 0.0,
            Component.POSITION_BIAS: 1.0 if swapped is not judge else 0.0,
            Component.GROUNDING: found / quotes if quotes else None,
            Component.UNANSWERED: unanswered / objections,
            Component.OUTPUT_CHECKS: min(1.0, findings / 3),
            Component.DECLARED: DECLARED_VALUE[declared],
        }
    )
    today = LEVEL_BASE[declared]
    today -= min(FABRICATION_PENALTY * (quotes - found), FABRICATION_PENALTY_CAP)
    today -= min(UNRESOLVED_PENALTY * unanswered, UNRESOLVED_PENALTY_CAP)
    today -= WEAK_CHALLENGE_PENALTY if rng.random() < 0.15 else 0.0
    today -= sum(rng.choice(OUTPUT_PENALTIES) for _ in range(findings))
    return Verdict(correct=correct, components=components, today=min(1.0, max(0.0, today)))


def world(n: int, seed: int) -> list[Verdict]:
    rng = random.Random(seed)
    return [debate(draw_case(rng), rng) for _ in range(n)]


def label(verdict: Verdict) -> Label:
    """The review label of a verdict (its confidence is recorded as the defaults scored it)."""
    return Label(
        kind=LabelKind.REVIEW,
        task_type="synthetic",
        correct=verdict.correct,
        confidence=DEFAULT_WEIGHTS.score(verdict.components),
        components=verdict.components,
        weights_version=DEFAULT_WEIGHTS.version,
    )


@dataclass(frozen=True)
class Row:
    name: str
    brier: float
    ece: float
    auroc: float | None
    threshold: float
    counts: EscalationCounts
    bins: list[ReliabilityBin]


def measured(
    name: str,
    fitting: Sequence[float],
    fitting_correct: Sequence[bool],
    evaluation: Sequence[float],
    correct: Sequence[bool],
    threshold: float | None = None,
) -> Row:
    """A confidence's figures on the evaluation half, at `threshold` or the one recommended on
    the fitting half."""
    if threshold is None:
        advice = recommend_threshold(fitting, fitting_correct, DEFAULT_TARGET)
        assert advice is not None, "the fitting half has wrong verdicts"
        threshold = advice.threshold
    score = brier(evaluation, correct)
    ece = expected_calibration_error(evaluation, correct)
    assert score is not None
    assert ece is not None
    return Row(
        name=name,
        brier=score,
        ece=ece,
        auroc=auroc(evaluation, correct),
        threshold=threshold,
        counts=escalation_at(evaluation, correct, threshold),
        bins=reliability(evaluation, correct),
    )


def percent(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="calibration-bench")
    parser.add_argument("--draws", type=int, default=1000, help="draws of the guarantee's table")
    args = parser.parse_args()

    verdicts = world(args.verdicts, args.seed)
    order = list(range(len(verdicts)))
    random.Random(args.seed + 1).shuffle(order)
    half = len(order) // 2
    fitting = [verdicts[i] for i in order[:half]]
    evaluation = [verdicts[i] for i in order[half:]]
    right = sum(v.correct for v in verdicts)
    print(
        f"synthetic world: {len(verdicts)} verdicts, {right} right ({right / len(verdicts):.1%}),"
        f" seed {args.seed}; fitted on {len(fitting)} review labels, every figure measured on"
        f" the other {len(evaluation)}"
    )
    outcome = propose([label(v) for v in fitting], current=DEFAULT_WEIGHTS, seed=args.seed)
    if not isinstance(outcome, Proposal):
        raise SystemExit(f"the fit was refused: {outcome.reason}")
    fitted = outcome.weights
    print(
        f"fit: {outcome.method}, version {fitted.version}; on its own held-out"
        f" {outcome.held_out} labels Brier {outcome.brier_fit:.4f} against"
        f" {outcome.brier_current:.4f} of {DEFAULT_WEIGHTS.version}"
    )
    print(
        f"  there, catching {DEFAULT_TARGET:.0%} of the wrong verdicts escalates"
        f" {percent(outcome.needless_fit)} of the right ones needlessly, against"
        f" {percent(outcome.needless_current)} with the defaults"
    )
    print(
        "  weights: "
        + ", ".join(f"{c.value} {w:+.2f}" for c, w in fitted.weights.items())
        + f", intercept {fitted.intercept:+.2f}"
    )

    fit_correct = [v.correct for v in fitting]
    correct = [v.correct for v in evaluation]
    scorers: dict[str, Callable[[Verdict], float]] = {
        "(a) today: moderator's level - penalties": lambda v: v.today,
        f"(b) default weights ({DEFAULT_WEIGHTS.version})": lambda v: DEFAULT_WEIGHTS.score(
            v.components
        ),
        f"(c) fitted weights ({fitted.version})": lambda v: fitted.score(v.components),
    }
    rows = [
        measured(
            name,
            [scorer(v) for v in fitting],
            fit_correct,
            [scorer(v) for v in evaluation],
            correct,
        )
        for name, scorer in scorers.items()
    ]
    today_fixed = measured(
        f"(a) today at today's fixed threshold {TODAYS_THRESHOLD}",
        [],
        [],
        [v.today for v in evaluation],
        correct,
        threshold=TODAYS_THRESHOLD,
    )

    print(
        f"\n{'confidence':<46} {'Brier':>7} {'ECE':>7} {'AUROC':>6} {'threshold':>10}"
        f" {'wrong escalated':>16} {'right escalated needlessly':>27}"
    )
    for row in [*rows, today_fixed]:
        counts = row.counts
        print(
            f"{row.name:<46} {row.brier:>7.4f} {row.ece:>7.4f}"
            f" {'n/a' if row.auroc is None else format(row.auroc, '.3f'):>6}"
            f" {row.threshold:>10.3f}"
            f" {percent(counts.wrong_share):>8} ({counts.wrong_escalated}/{counts.wrong})"
            f" {percent(counts.needless_share):>15} ({counts.right_escalated}/{counts.right})"
        )
    print(
        f"\nthresholds: each confidence's recommended on the fitting half (>= {DEFAULT_TARGET:.0%}"
        " of its wrong verdicts escalated, the fewest right ones), applied to the evaluation half"
    )

    print("\nreliability on the evaluation half (share right / verdicts per bin):")
    print(f"{'bin':<10}" + "".join(f" {row.name[:3]:>16}" for row in rows))
    for index in range(len(rows[0].bins)):
        cells = []
        for row in rows:
            b = row.bins[index]
            cells.append(
                f"{'-' if b.accuracy is None else format(b.accuracy, '.2f'):>9} / {b.count:>4}"
            )
        b = rows[0].bins[index]
        print(f"{b.lower:.1f}-{b.upper:.1f}   " + " ".join(f"{c:>16}" for c in cells))

    out = Path(args.out)
    before = write_reliability_png(
        out / "before.png",
        [("today", rows[0].bins), ("default weights", rows[1].bins)],
        title="Before fitting: today's confidence and the default weights",
    )
    after = write_reliability_png(
        out / "after.png",
        [("fitted weights", rows[2].bins)],
        title=f"After fitting: {fitted.version}",
    )
    print(f"\nreliability diagrams: {before}, {after}")
    # Imported here: guarantee_world imports this module's world.
    from benchmarks.guarantee_world import report

    report(draws=args.draws, seed=args.seed)


if __name__ == "__main__":
    main()
