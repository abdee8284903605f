"""Slack events kept for later (`held_trigger`, bot.store.held_tables), bounded per workspace.

`hold` keeps one in the session's workspace, once per key: a second hold of the same event (a
replay that met the refusal again, or Slack sending it again) updates the row and hands it
back. `claim` hands each due row to one replica (a conditional update, like the token probes'
in bot.store.refusals): due, unclaimed or its claim lapsed, and, for a workspace with OAuth
installs, not one whose bot token Slack refuses (`refusals.token_refused`), so the replica that
sees the refusal mark cleared takes them, whichever replica cleared it. `finish` deletes a row
still claimed by its replayer (a replay that held it again has released it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.held_tables import HeldReason, HeldTrigger
from bot.store.refusals import token_refused
from bot.store.tenancy import workspace_of
from engine.models import utcnow


@dataclass(frozen=True)
class HeldLimits:
    """How much one workspace keeps: `max_held` events at once (each holds Slack's payload),
    none older than `max_age_s` replayed, and none replayed more than `max_attempts` times;
    past them its sender is told instead (bot.slack.held)."""

    max_held: int = 200
    max_age_s: float = 24 * 3600.0
    max_attempts: int = 5


class Held(StrEnum):
    """What `hold` did."""

    NEW = "new"
    """Kept, the first time."""
    AGAIN = "again"
    """Kept already: updated and handed back for its next replay."""
    FULL = "full"
    """Not kept: the workspace holds `max_held` events already."""


def hold(
    session: Session,
    *,
    key: str,
    body: str,
    reason: HeldReason,
    event_at: datetime,
    due_at: datetime,
    user_id: str | None,
    channel_id: str | None,
    limits: HeldLimits,
) -> Held:
    """Keep the event `key` in the session's workspace until `due_at` (and, for a refused
    token, until the token works). Committed."""
    workspace_of(session)
    kept = session.exec(select(HeldTrigger).where(col(HeldTrigger.key) == key)).first()
    if kept is not None:
        kept.reason, kept.due_at = reason, due_at
        kept.claimed_by, kept.claimed_until = None, None
        session.add(kept)
        session.commit()
        return Held.AGAIN
    count = session.exec(select(func.count()).select_from(HeldTrigger)).one()
    if int(count) >= limits.max_held:
        return Held.FULL
    session.add(
        HeldTrigger(
            key=key,
            body=body,
            reason=reason,
            event_at=event_at,
            due_at=due_at,
            user_id=user_id,
            channel_id=channel_id,
        )
    )
    try:
        session.commit()
    except IntegrityError:
        session.rollback()  # held meanwhile by another delivery of the same event
        return Held.AGAIN
    return Held.NEW


def claim(session: Session, *, owner: str, claim_s: float, limit: int) -> list[HeldTrigger]:
    """Up to `limit` due rows of workspaces whose token is not refused, oldest event first,
    each claimed by `owner` for `claim_s` with its attempt counted. Run for every workspace.
    Committed."""
    now = utcnow()
    free = or_(col(HeldTrigger.claimed_until).is_(None), col(HeldTrigger.claimed_until) < now)
    due = session.exec(
        select(HeldTrigger.id)
        .where(
            col(HeldTrigger.due_at) <= now,
            free,
            ~token_refused(col(HeldTrigger.team_id), col(HeldTrigger.enterprise_id)),
        )
        .order_by(col(HeldTrigger.event_at))
        .limit(limit)
    ).all()
    taken: list[int] = []
    for row_id in due:
        moved = _run(
            session,
            update(HeldTrigger)
            .where(col(HeldTrigger.id) == row_id, free)
            .values(
                claimed_by=owner,
                claimed_until=now + timedelta(seconds=claim_s),
                attempts=col(HeldTrigger.attempts) + 1,
            ),
        )
        session.commit()
        if moved == 1:
            taken.append(int(row_id or 0))
    if not taken:
        return []
    query = select(HeldTrigger).where(col(HeldTrigger.id).in_(taken))
    return list(session.exec(query.order_by(col(HeldTrigger.event_at))).all())


def finish(session: Session, *, row_id: int, owner: str) -> bool:
    """Forget a row `owner` replayed or gave up, unless the replay held it again (which
    released it). Committed."""
    gone = _run(
        session,
        delete(HeldTrigger).where(
            col(HeldTrigger.id) == row_id, col(HeldTrigger.claimed_by) == owner
        ),
    )
    session.commit()
    return gone == 1


def held_count(session: Session) -> int:
    """How many events the session's scope holds (for the operator and tests)."""
    return int(session.exec(select(func.count()).select_from(HeldTrigger)).one())


def _run(session: Session, statement: Any) -> int:
    """Run an UPDATE or DELETE; how many rows it changed."""
    result = cast("CursorResult[Any]", session.execute(statement))
    return int(result.rowcount or 0)
