"""The calibration report of the stored labels against the weights in use, as `debatebot
calibration` and App Home show it; a fit that beats those weights is stored as a proposed
version, so an admin can adopt it."""

from __future__ import annotations

from sqlmodel import Session

from bot.store import labels, weights
from engine.calibration.fitting import Proposal
from engine.calibration.report import CalibrationReport, calibrate


def calibration_report(session: Session, *, target: float, min_labels: int) -> CalibrationReport:
    """Every label's figures (per task type, overall, feedback apart) and the fit's outcome;
    a proposal is stored (committed) before it is returned."""
    report = calibrate(
        labels.labels(session),
        current=weights.active_weights(session),
        target=target,
        min_labels=min_labels,
    )
    fit = report.fit
    if isinstance(fit, Proposal):
        weights.propose_weights(
            session,
            weights=fit.weights,
            evidence={
                "method": fit.method,
                "trained_on": fit.trained_on,
                "held_out": fit.held_out,
                "brier_fit": fit.brier_fit,
                "brier_current": fit.brier_current,
                "current_version": fit.current_version,
                "needless_fit": fit.needless_fit,
                "needless_current": fit.needless_current,
                "task_types": report.fitted_task_types,
                **fit.evidence,
            },
        )
    return report
