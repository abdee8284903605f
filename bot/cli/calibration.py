"""`debatebot calibration`: how well the confidence predicted what reviewers decided, per task
type and overall, with the reliability diagram as a PNG and the weights a fit proposes;
`calibration adopt VERSION` makes a version score new verdicts; `calibration import-eval`
turns an eval's results into labels."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from sqlmodel import Session

from bot.cli.reliability_chart import write_reliability_png
from bot.jobs.sampling import calibration_report
from bot.settings import Settings
from bot.store import labels, thresholds, weights
from bot.store.calibration import calibration_inputs, store_proposal
from bot.store.db import session_scope
from bot.store.tenancy import PENDING_WORKSPACE, Scope, scope_for
from bot.wiring import open_store
from engine.calibration.exchangeable import exchangeable
from engine.calibration.fitting import Proposal, Refused
from engine.calibration.guarantee import Guaranteed, Outcome, Reading, describe, guarantee
from engine.calibration.labels import STRONG_KINDS, LabelKind
from engine.calibration.report import CalibrationReport, Figures
from engine.calibration.threshold import recommend_threshold
from engine.evaluation.scoring import ArmResult
from engine.models import ThresholdSource
from engine.protocols import protocol_names


def calibration(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.action == "adopt" and not args.target:
        print("debatebot: calibration adopt takes a weights version", file=sys.stderr)
        return 2
    if args.action == "import-eval" and not args.target:
        print(
            "debatebot: calibration import-eval takes an eval's --out folder or its results.jsonl",
            file=sys.stderr,
        )
        return 2
    with open_store(settings) as engine, session_scope(engine, workspace=_scope(args)) as session:
        if args.action == "adopt":
            return _adopt(session, args.target, ThresholdSource(args.threshold), settings)
        if args.action == "import-eval":
            return _import_eval(session, Path(args.target), force=args.force)
        found, current = calibration_inputs(session)
        report = calibration_report(
            found, current=current, settings=settings, alpha=args.alpha, delta=args.delta
        )
        store_proposal(session, report=report)
    print_report(report)
    series = [(figures.group, figures.bins) for figures in [report.overall, *report.by_task_type]]
    path = write_reliability_png(
        Path(args.png), series, title="Reliability of the confidence (reviews and evals)"
    )
    print(f"\nreliability diagram: {path}")
    return 0


def _adopt(session: Session, version: str, source: ThresholdSource, settings: Settings) -> int:
    before = weights.active_weights(session).version
    threshold: float | None = None
    if source is not ThresholdSource.FIXED:
        chosen = _threshold_for(session, version, source, settings)
        if isinstance(chosen, str):
            print(f"debatebot: nothing was adopted: {chosen}", file=sys.stderr)
            return 1
        threshold = chosen
    adoption = weights.adopt_weights(session, version=version, by=f"cli:{getpass.getuser()}")
    thresholds.adopt_threshold(
        session, source=source, threshold=threshold, version=version, by=adoption.adopted_by
    )
    print(
        f"adopted confidence weights {adoption.version} (by {adoption.adopted_by}); new verdicts"
        f" are scored with them (before: {before})"
    )
    where = (
        f"the {source.value} threshold {threshold:.3f}"
        if threshold is not None
        else f"the fixed DEBATEBOT_ESCALATION_THRESHOLD ({settings.escalation_threshold:g})"
    )
    print(f"escalation threshold: {where}; a channel's own threshold still wins")
    return 0


def _threshold_for(
    session: Session, version: str, source: ThresholdSource, settings: Settings
) -> float | str:
    """The threshold `source` names for the weights `version`, or why there is none. A fitted
    version's guaranteed threshold is the one its proposal computed on labels its fit never saw;
    any other version's (the defaults') is computed now on the sampled reviews and eval labels."""
    found = weights.weights_of(session, version)
    if found is None:
        return f"no confidence weights version {version!r} (see `debatebot calibration`)"
    scored, evidence = found
    every = labels.labels(session)
    if source is ThresholdSource.RECOMMENDED:
        usable = [label for label in every if label.kind in STRONG_KINDS and label.components]
        advice = recommend_threshold(
            [scored.score(label.components) for label in usable if label.components],
            [label.correct for label in usable if label.components],
            settings.calibration_target,
        )
        if advice is None or not advice.reached:
            return f"the labels recommend no threshold for {version} (no wrong verdict to catch)"
        return advice.threshold
    if "guaranteed_threshold" in evidence:
        stored = evidence["guaranteed_threshold"]
        if isinstance(stored, int | float):
            return float(stored)
        return (
            f"{version}'s held-out eval labels support no guaranteed threshold; adopt it with"
            " --threshold recommended or fixed, or label more verdicts"
        )
    if evidence.get("method"):
        return f"{version} was proposed before guaranteed thresholds were computed"
    basis = exchangeable(every, weights=scored, default_threshold=settings.escalation_threshold)
    outcome = guarantee(
        basis.confidences,
        basis.correct,
        reading=Reading.KEPT,
        alpha=settings.calibration_alpha,
        delta=settings.calibration_delta,
        floor=basis.floor,
    )
    if isinstance(outcome, Guaranteed):
        return outcome.threshold
    return f"no guaranteed threshold for {version}: {outcome.reason}"


UNTRUSTED_PROVIDERS = frozenset({"fake"})
"""Providers whose verdicts say nothing about a model's confidence: the fake provider's are
canned, so labels from them would teach the calibration nothing true."""


def _set_aside(result: ArmResult) -> str | None:
    """Why `result` is kept out of the labels unless forced, or None to pass it on (a
    single-model arm's is left out by `labels.import_eval` anyway, with its own reason)."""
    if result.arm not in protocol_names():
        return None
    if not result.providers:
        return "record no provider (an eval from before providers were recorded)"
    if UNTRUSTED_PROVIDERS & set(result.providers):
        return "came from the fake provider"
    return None


def _import_eval(session: Session, where: Path, *, force: bool = False) -> int:
    path = where / "results.jsonl" if where.is_dir() else where
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        print(
            f"debatebot: cannot read eval results at {path} ({error.strerror}); pass the eval's"
            " --out folder or its results.jsonl",
            file=sys.stderr,
        )
        return 1
    results: dict[tuple[str, str, str], ArmResult] = {}
    unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            result = ArmResult.model_validate_json(line)
        except ValueError:
            unreadable += 1
            continue
        results[result.key] = result  # the latest run of each (as the eval's report reads)
    aside: dict[str, int] = {}
    kept: list[ArmResult] = []
    for result in results.values():
        why = None if force else _set_aside(result)
        if why is None:
            kept.append(result)
        else:
            aside[why] = aside.get(why, 0) + 1
    imported = labels.import_eval(session, results=kept)
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(imported.skipped.items()))
    print(
        f"imported {imported.added} eval label(s) from {path}; {imported.present} already"
        f" there" + (f"; left out: {skipped}" if skipped else "")
    )
    if unreadable:
        print(f"{unreadable} line(s) of {path} are not eval results and were skipped")
    for why, count in sorted(aside.items()):
        print(
            f"debatebot: set aside {count} result(s) that {why}: the fake provider's verdicts"
            " are canned and would teach the calibration nothing true. Run the eval on a real"
            " model, or pass --force to import them anyway",
            file=sys.stderr,
        )
    return 1 if aside else 0


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "n/a"


def _value(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def figure_row(figures: Figures) -> str:
    advice = figures.advice
    if advice is None:
        threshold = wrong = needless = "n/a"
    else:
        counts = advice.counts
        threshold = f"{advice.threshold:.3f}" + ("" if advice.reached else "*")
        wrong = _share(counts.wrong_escalated, counts.wrong)
        needless = _share(counts.right_escalated, counts.right)
    return (
        f"{figures.group[:16]:<16} {figures.labels:>6} {figures.wrong:>6} {figures.sampled:>7}"
        f" {_value(figures.brier):>7} {_value(figures.ece):>7} {_value(figures.auroc, 2):>6}"
        f" {threshold:>10} {wrong:>16} {needless:>16}"
    )


def print_report(report: CalibrationReport) -> None:
    kinds, target = report.kinds, report.target
    print(
        f"calibration: {sum(kinds.values())} label(s): {kinds[LabelKind.REVIEW]} from reviews,"
        f" {kinds[LabelKind.EVAL]} from evals, {kinds[LabelKind.FEEDBACK]} from feedback"
        " (weaker, shown apart)"
    )
    print(f"weights in use: {report.current.version} ({report.current.source})")
    print(
        f"threshold: the lowest that escalates at least {target:.0%} of the wrong verdicts"
        " (DEBATEBOT_CALIBRATION_TARGET); * where no threshold reaches it"
    )
    print(
        f"\n{'task type':<16} {'labels':>6} {'wrong':>6} {'sampled':>7} {'Brier':>7} {'ECE':>7}"
        f" {'AUROC':>6} {'threshold':>10} {'wrong escalated':>16} {'needless':>16}"
    )
    for figures in [report.overall, *report.by_task_type]:
        print(figure_row(figures))
    print(figure_row(report.feedback))
    print_guarantees(report)
    print("\nreliability (all reviews and evals; ECE over ten equal-width bins):")
    print(f"{'confidence':<12} {'verdicts':>8} {'mean conf.':>10} {'right':>7}")
    for row in report.overall.bins:
        print(
            f"{row.lower:.1f}-{row.upper:.1f}{'':<5} {row.count:>8}"
            f" {_value(row.mean_confidence):>10} {_value(row.accuracy):>7}"
        )
    fit = report.fit
    if isinstance(fit, Proposal):
        print(
            f"\nproposed weights {fit.weights.version} ({fit.method}, fitted on"
            f" {', '.join(report.fitted_task_types)}): held-out Brier {fit.brier_fit:.4f}"
            f" against {fit.brier_current:.4f} of {fit.current_version} on {fit.held_out}"
            f" label(s). Adopt them with `debatebot calibration adopt {fit.weights.version}`"
            " (or on App Home)."
        )
        if fit.needless_fit is not None and fit.needless_current is not None:
            print(
                f"  on those labels, catching {target:.0%} of the wrong verdicts escalates"
                f" {fit.needless_fit:.0%} of the right ones needlessly with these weights,"
                f" {fit.needless_current:.0%} with {fit.current_version}"
            )
        for component, weight in fit.weights.weights.items():
            print(f"  {component.value:<14} {weight:+.3f}")
        print(f"  {'intercept':<14} {fit.weights.intercept:+.3f}")
    elif isinstance(fit, Refused):
        print(f"\nno weights proposed: {fit.reason}")
    else:
        print(f"\nno fit yet: {fit.reason}")


def outcome_line(outcome: Outcome) -> str:
    """One reading's guaranteed threshold and what it escalates, or why there is none."""
    said = describe(outcome.reading, outcome.alpha)
    if isinstance(outcome, Guaranteed):
        return (
            f"{said}: threshold {outcome.threshold:.3f}, escalates"
            f" {outcome.escalated_share:.0%} of the labels (upper bound on the risk"
            f" {outcome.upper_bound:.1%}: {outcome.events} of {outcome.trials})"
        )
    return f"{said}: no guaranteed threshold: {outcome.reason}"


def print_guarantees(report: CalibrationReport) -> None:
    """Each group's guaranteed thresholds, for both readings, with the labels they rest on."""
    terms = report.terms
    if terms is None:
        return
    print(
        f"\nguaranteed thresholds (weights {terms.weights.version}; each holds with probability"
        f" at least {1 - terms.delta:.0%} over the labels; DEBATEBOT_CALIBRATION_ALPHA"
        f" {terms.alpha:g}, _DELTA {terms.delta:g}). Only sampled reviews and eval labels"
        " count: reviews of escalated verdicts are drawn from the doubted ones (fit only)"
    )
    for figures in [report.overall, *report.by_task_type]:
        basis = figures.basis
        if basis is None or figures.guaranteed is None:
            continue
        aside = (
            f"; {basis.other_weights} set aside (scored by other weights)"
            if basis.other_weights
            else ""
        )
        print(
            f"{figures.group}: {len(basis.confidences)} label(s): {basis.sampled} sampled"
            f" review(s), {basis.evals} eval label(s); {basis.fit_only} review(s) of escalated"
            f" verdicts for the fit only{aside}"
        )
        for reading in Reading:
            print(f"  {outcome_line(figures.guaranteed[reading])}")
    if report.fit_guaranteed is not None and isinstance(report.fit, Proposal):
        print(f"proposed weights {report.fit.weights.version}, on its held-out eval labels:")
        for reading in Reading:
            print(f"  {outcome_line(report.fit_guaranteed[reading])}")


def _scope(args: argparse.Namespace) -> Scope:
    """`--team`'s workspace; without it, every workspace's labels are read, and what is
    written (an adoption, imported labels) is the deployment's own workspace's (pending until a
    single-workspace bot learns its id)."""
    if args.team or args.action == "show":
        return scope_for(args.team)
    return PENDING_WORKSPACE
