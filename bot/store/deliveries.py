"""The operator's view of messages that are not getting through (issue 44): given up (FAILED,
past their deadline) or held (owed to a workspace whose bot token Slack refuses,
bot.store.refusals), and a retry of one, so none of it needs SQL. Delivery itself is
bot.store.outbox's and bot.jobs.delivery's: a retried row is an ordinary pending row again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from sqlalchemy import and_, or_, update
from sqlmodel import Session, col, select

from bot.store import refusals
from bot.store.errors import DeliveryNotRetryableError
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.sql import as_stored, rows_changed
from engine.models import utcnow


class Stuck(StrEnum):
    """Why a message is not getting through."""

    GIVEN_UP = "given_up"
    """Its deadline passed while Slack refused it or could not be reached (state FAILED)."""
    HELD = "held"
    """Owed to a workspace whose bot token Slack refuses: kept until the token works."""


@dataclass(frozen=True)
class StuckDelivery:
    row: Outbox
    why: Stuck


def stuck(session: Session, *, limit: int = 50) -> list[StuckDelivery]:
    """The messages held or given up, newest first, at most `limit`."""
    held = and_(
        col(Outbox.state).in_([OutboxState.PENDING, OutboxState.SENDING]),
        refusals.token_refused(col(Outbox.team_id), col(Outbox.enterprise_id)),
    )
    query = (
        select(Outbox)
        .where(or_(col(Outbox.state) == OutboxState.FAILED, held))
        .order_by(col(Outbox.id).desc())
        .limit(limit)
    )
    return [
        StuckDelivery(row, Stuck.GIVEN_UP if row.state == OutboxState.FAILED else Stuck.HELD)
        for row in session.exec(query)
    ]


def retry(session: Session, *, outbox_id: int, window: timedelta) -> Outbox:
    """Owe message `outbox_id` again, due now, with a fresh count of attempts and `window` to
    get through, committed. A given-up message is pending again; a held one is due now (it
    still waits for its workspace's token). Raises DeliveryNotRetryableError for an unknown
    message, or one sent or being sent."""
    now = utcnow()
    changed = session.execute(
        update(Outbox)
        .where(
            col(Outbox.id) == outbox_id,
            col(Outbox.state).in_([OutboxState.FAILED, OutboxState.PENDING]),
        )
        .values(
            state=OutboxState.PENDING,
            attempts=0,
            next_attempt_at=now,
            deadline_at=now + window,
            claimed_by=None,
            claimed_until=None,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    row = as_stored(session, Outbox, col(Outbox.id) == outbox_id).one_or_none()
    if row is None:
        raise DeliveryNotRetryableError(f"no message with id {outbox_id} is owed")
    if not rows_changed(changed):
        raise DeliveryNotRetryableError(
            f"message {outbox_id} is {row.state.value}: only a message given up (failed) or"
            " held can be retried"
        )
    return row
