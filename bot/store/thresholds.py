"""A workspace's escalation-threshold setting: chosen with a weights adoption, read when a
debate's spec is built."""

from __future__ import annotations

from sqlmodel import Session, col, select

from bot.store.threshold_tables import ThresholdAdoption
from engine.models import ThresholdSource, utcnow


def adopt_threshold(
    session: Session,
    *,
    source: ThresholdSource,
    threshold: float | None,
    version: str | None,
    by: str,
) -> ThresholdAdoption:
    """Record the workspace's choice (committed): `threshold` for guaranteed or recommended,
    None for fixed."""
    row = ThresholdAdoption(
        source=source, threshold=threshold, version=version, adopted_by=by, adopted_at=utcnow()
    )
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def adopted_threshold(session: Session) -> tuple[float, ThresholdSource] | None:
    """The workspace's adopted threshold and where it came from; None when it keeps the
    deployment's fixed one (or chose none)."""
    row = session.exec(
        select(ThresholdAdoption).order_by(col(ThresholdAdoption.id).desc()).limit(1)
    ).first()
    if row is None or row.threshold is None or row.source is ThresholdSource.FIXED:
        return None
    return row.threshold, row.source
