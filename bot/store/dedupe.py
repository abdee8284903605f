"""Slack event ids already handled, and short windows that absorb a double click."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from bot.store.tables import (
    ProcessedTrigger,
)
from engine.models import utcnow


def was_processed(session: Session, *, key: str) -> bool:
    return session.get(ProcessedTrigger, key) is not None


def mark_processed(session: Session, *, key: str, debate_id: int | None = None) -> bool:
    """Remember a Slack event id (or other trigger key); False when it was seen before."""
    session.add(ProcessedTrigger(key=key, debate_id=debate_id))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def open_window(session: Session, *, key: str, window_s: float) -> bool:
    """True unless `key` was opened within the last `window_s` seconds (a double click)."""
    now = utcnow()
    session.add(ProcessedTrigger(key=key, created_at=now))
    try:
        session.commit()
        return True
    except IntegrityError:
        session.rollback()
    reopened = session.execute(
        update(ProcessedTrigger)
        .where(
            col(ProcessedTrigger.key) == key,
            col(ProcessedTrigger.created_at) < now - timedelta(seconds=window_s),
        )
        .values(created_at=now)
    )
    session.commit()
    return bool(reopened.rowcount)  # type: ignore[attr-defined]
