"""Posts whose fate at Slack is unknown: an outbox row records when a post of it was last handed
to Slack (`Outbox.in_doubt_at`) until Slack's answer says it was not taken. A process killed
while Slack held the answer, or a call that timed out, leaves the mark; the next send of the row
looks for the post in Slack before sending it again (bot.jobs.resend_check)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col

from bot.store.outbox_tables import Outbox, OutboxState


def _mark(session: Session, *, row_id: int, owner: str, at: datetime | None) -> bool:
    """Set the row's mark, if `owner` still holds its claim; whether it did."""
    marked = session.execute(
        update(Outbox)
        .where(
            col(Outbox.id) == row_id,
            col(Outbox.claimed_by) == owner,
            col(Outbox.state) == OutboxState.SENDING,
        )
        .values(in_doubt_at=at)
        .returning(col(Outbox.id))
    ).scalar_one_or_none()
    session.commit()
    return marked is not None


def sending(session: Session, *, row_id: int, owner: str, at: datetime) -> bool:
    """Note that a post of the row is about to be handed to Slack, at `at`: until its answer
    is recorded, Slack may hold a copy the row does not know of. False when the claim is lost
    (another process sends the row: this one must not)."""
    return _mark(session, row_id=row_id, owner=owner, at=at)


def not_taken(session: Session, *, row_id: int, owner: str) -> None:
    """Slack's answer says it did not take the post (a refusal, a rate limit): no copy to look
    for before the next send."""
    _mark(session, row_id=row_id, owner=owner, at=None)
