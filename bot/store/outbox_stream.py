"""A debate's streamed plan: its one outbox row (`stream`) claimed, what Slack has of it
(`streamed`, `stream_state`) recorded, a stream Slack would not start given up for the parent's
live status, and whether the stream shows the debate's progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from bot.store.debate_tables import Debate, DebateState
from bot.store.outbox import PARENT, PARENT_UPDATE, SHOWN_IN_STREAM, STREAM, row_for
from bot.store.outbox_claims import claimed_with_debate, due, owned
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxState, StreamState
from engine.models import utcnow


@dataclass(frozen=True)
class ClaimedStream:
    """A stream row claimed for delivery, with its debate and the parent it must follow."""

    row: Outbox
    debate: Debate
    parent: Outbox | None


def claim_stream(
    session: Session, *, debate_id: int, owner: str, claim_s: float
) -> ClaimedStream | None:
    """Claim the debate's stream row if it is due."""
    row = due_stream(session, debate_id=debate_id)
    claimed = claimed_with_debate(session, row, owner, claim_s)
    if claimed is None:
        return None
    return ClaimedStream(*claimed, row_for(session, debate_id=debate_id, key=PARENT))


def due_stream(session: Session, *, debate_id: int) -> Outbox | None:
    """The debate's stream row if it is due, read without claiming it (to see what it shows)."""
    return session.exec(
        select(Outbox).where(
            Outbox.debate_id == debate_id, Outbox.action == OutboxAction.STREAM, due(utcnow())
        )
    ).one_or_none()


def delivered_ts(session: Session, *, channel_id: str, thread_ts: str) -> set[str]:
    """The ts of every message the outbox delivered for the debates of one thread (a thread
    some debates share: the ones asked from it)."""
    rows = session.exec(
        select(Outbox.deliveries)
        .join(Debate, col(Debate.id) == col(Outbox.debate_id))
        .where(Debate.channel_id == channel_id, Debate.thread_ts == thread_ts)
    ).all()
    return {str(ts) for deliveries in rows for _channel, ts in deliveries or []}


def stream_starting(session: Session, *, row_id: int, owner: str) -> Outbox | None:
    """Note that `chat.startStream` is about to be sent for the row: until its answer is
    recorded, Slack may hold a stream the row does not know of."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    row.stream_state = StreamState.STARTING
    session.add(row)
    session.commit()
    return row


def mark_streamed(
    session: Session,
    *,
    row_id: int,
    owner: str,
    version: int,
    streamed: list[dict[str, Any]],
    stream_state: StreamState,
    deliveries: list[list[str]] | None = None,
    thread_ts: str | None = None,
    delivered_to: str,
    more: bool = False,
) -> Outbox | None:
    """Record what Slack has of the stream (`streamed`), where its message stands and, when it
    was just started or posted again, where it is (`deliveries`, in thread `thread_ts`). A
    version that changed meanwhile, or `more` to send at once (a stream started with its final
    version), stays due."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    now = utcnow()
    row.streamed = streamed
    row.stream_state = stream_state
    if deliveries is not None:
        row.deliveries = deliveries
        row.stream_thread_ts = thread_ts
    row.delivered_to = delivered_to
    row.claimed_by, row.claimed_until = None, None
    row.last_error = None
    row.attempts = 0
    if stream_state != StreamState.CLOSED and (more or row.version != version):
        row.state = OutboxState.PENDING
        row.next_attempt_at = now
    else:
        row.state = OutboxState.SENT
        row.sent_at = now
    session.add(row)
    session.commit()
    return row


def refuse_stream(session: Session, *, row_id: int, owner: str, error: str) -> Outbox | None:
    """Slack would not start the stream: it is given up for good, and the parent's live
    status, which the stream stood in for, is owed again (the newest is sent)."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    row.state = OutboxState.FAILED
    row.stream_state = StreamState.REFUSED
    row.last_error = error
    row.attempts += 1
    row.claimed_by, row.claimed_until = None, None
    session.add(row)
    session.execute(
        update(Outbox)
        .where(
            col(Outbox.debate_id) == row.debate_id,
            col(Outbox.key) == PARENT_UPDATE,
            col(Outbox.state) == OutboxState.SENT,
            col(Outbox.delivered_to) == SHOWN_IN_STREAM,
        )
        .values(state=OutboxState.PENDING, next_attempt_at=utcnow())
    )
    session.commit()
    return row


def progress_streamed(session: Session, *, debate_id: int) -> bool:
    """Whether the debate's progress is shown by its streamed plan: it is running and has a
    stream Slack did not refuse. Its parent's live status is then not sent (the summary at
    the end always is)."""
    debate = session.get(Debate, debate_id)
    if debate is None or debate.state == DebateState.FINISHED:
        return False
    row = row_for(session, debate_id=debate_id, key=STREAM)
    return (
        row is not None
        and row.stream_state != StreamState.REFUSED
        and row.state != OutboxState.FAILED
    )
