"""What the calibration report reads from the store (every label and the weights in use) and
what it writes back (the weights a fit proposes, so an admin can adopt them). The report itself
is `engine.calibration.report.calibrate`, run by the caller off the store's threads: a fit is
CPU work that must not hold a thread the debates' writes wait for."""

from __future__ import annotations

from sqlmodel import Session

from bot.store import labels, weights
from engine.calibration.fitting import Proposal
from engine.calibration.guarantee import Guaranteed, Reading
from engine.calibration.labels import Label
from engine.calibration.report import CalibrationReport
from engine.confidence import ConfidenceWeights


def weights_and_samples(session: Session) -> tuple[ConfidenceWeights, int]:
    """The weights that score new verdicts, and how many sampled reviews they scored: the
    labels a guaranteed threshold for them may rest on (the sampler raises its share while
    they are few)."""
    current = weights.active_weights(session)
    sampled = labels.sampled_count(session, weights_version=current.version)
    return current, sampled


def calibration_inputs(session: Session) -> tuple[list[Label], ConfidenceWeights]:
    """Every label, and the weights that score new verdicts."""
    return labels.labels(session), weights.active_weights(session)


def store_proposal(session: Session, *, report: CalibrationReport) -> None:
    """Store the weights `report` proposes (committed), with what their fit was checked on;
    nothing when it proposes none."""
    fit = report.fit
    if not isinstance(fit, Proposal):
        return
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
            # Its own guaranteed threshold (on held-out eval labels), adopted with it on request.
            "guaranteed_threshold": _kept(report),
            **fit.evidence,
        },
    )


def _kept(report: CalibrationReport) -> float | None:
    found = (report.fit_guaranteed or {}).get(Reading.KEPT)
    return found.threshold if isinstance(found, Guaranteed) else None
