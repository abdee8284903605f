"""The versions of the confidence weights: proposed by a fit, adopted by an admin. The newest
adoption's version scores new verdicts; with none, the confidence model's defaults do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.calibration_tables import WeightsAdoption, WeightsVersion
from bot.store.errors import WeightsNotFoundError
from engine.confidence import DEFAULT_WEIGHTS, ConfidenceWeights
from engine.models import utcnow


def propose_weights(
    session: Session, *, weights: ConfidenceWeights, evidence: dict[str, Any]
) -> WeightsVersion:
    """Store `weights` as a version that may be adopted (committed); a version already stored
    is kept as it was (its name is its content's hash, so it holds the same weights)."""
    existing = session.get(WeightsVersion, weights.version)
    if existing is not None:
        return existing
    row = WeightsVersion(
        version=weights.version, weights_json=weights.model_dump_json(), evidence=evidence
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        # Proposed at the same moment by another process (App Home and the command).
        session.rollback()
        stored = session.get(WeightsVersion, weights.version)
        assert stored is not None
        return stored
    return row


def adopt_weights(session: Session, *, version: str, by: str) -> WeightsAdoption:
    """Make `version` the weights that score new verdicts, recording who and when (committed).
    The defaults' version may be adopted too, to go back to them. WeightsNotFoundError when no
    such version was proposed."""
    if session.get(WeightsVersion, version) is None:
        if version != DEFAULT_WEIGHTS.version:
            known = ", ".join(row.version for row in _versions(session)) or "none yet"
            raise WeightsNotFoundError(
                f"no confidence weights version {version!r}; proposed versions: {known}, and"
                f" {DEFAULT_WEIGHTS.version} (the defaults). `debatebot calibration` proposes"
                " one when the labels allow a fit"
            )
        propose_weights(session, weights=DEFAULT_WEIGHTS, evidence={"default": True})
    adoption = WeightsAdoption(version=version, adopted_by=by, adopted_at=utcnow())
    session.add(adoption)
    session.commit()
    session.refresh(adoption)
    return adoption


def _latest_adoption(session: Session) -> WeightsAdoption | None:
    return session.exec(
        select(WeightsAdoption).order_by(col(WeightsAdoption.id).desc()).limit(1)
    ).first()


def _versions(session: Session) -> list[WeightsVersion]:
    return list(session.exec(select(WeightsVersion).order_by(col(WeightsVersion.proposed_at))))


def active_weights(session: Session) -> ConfidenceWeights:
    """The weights that score new verdicts: the newest adoption's version, or the confidence
    model's defaults when none was adopted."""
    adoption = _latest_adoption(session)
    if adoption is None:
        return DEFAULT_WEIGHTS
    row = session.get(WeightsVersion, adoption.version)
    assert row is not None  # an adoption refers to a stored version (foreign key)
    return ConfidenceWeights.model_validate_json(row.weights_json)


def weights_of(session: Session, version: str) -> tuple[ConfidenceWeights, dict[str, Any]] | None:
    """The weights `version` names and what its fit was checked on (the defaults' evidence is
    empty until adopted); None when no such version exists."""
    row = session.get(WeightsVersion, version)
    if row is not None:
        return ConfidenceWeights.model_validate_json(row.weights_json), row.evidence
    return (DEFAULT_WEIGHTS, {}) if version == DEFAULT_WEIGHTS.version else None


@dataclass(frozen=True)
class VersionInfo:
    """One stored version: when it was proposed, when last adopted and by whom, whether it is
    the one in use, and what its fit was checked on."""

    version: str
    source: str
    proposed_at: datetime
    adopted_at: datetime | None
    adopted_by: str | None
    active: bool
    evidence: dict[str, Any]


def weights_versions(session: Session) -> list[VersionInfo]:
    """Every stored version, oldest proposal first."""
    latest = _latest_adoption(session)
    last: dict[str, WeightsAdoption] = {}
    for adoption in session.exec(select(WeightsAdoption).order_by(col(WeightsAdoption.id))):
        last[adoption.version] = adoption
    return [
        VersionInfo(
            version=row.version,
            source=ConfidenceWeights.model_validate_json(row.weights_json).source,
            proposed_at=row.proposed_at,
            adopted_at=last[row.version].adopted_at if row.version in last else None,
            adopted_by=last[row.version].adopted_by if row.version in last else None,
            active=latest is not None and latest.version == row.version,
            evidence=row.evidence,
        )
        for row in _versions(session)
    ]


def adoptions(session: Session) -> list[WeightsAdoption]:
    """Every adoption, oldest first: the audit trail of which weights scored when."""
    return list(session.exec(select(WeightsAdoption).order_by(col(WeightsAdoption.id))))
