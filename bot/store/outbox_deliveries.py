"""What became of a claimed outbox message: Slack took it (where), it waits for a retry, it
was given up or re-split smaller; a parent posted again, and a debate halted because its thread
cannot be reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from bot.store.debate_tables import Debate
from bot.store.outbox import PARENT, PARENT_UPDATE, REVIEW, Draft, stage
from bot.store.outbox_claims import owned
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxState, OutboxTarget
from bot.store.review_tables import Escalation
from engine.models import utcnow


def mark_sent(
    session: Session,
    *,
    row_id: int,
    owner: str,
    version: int,
    deliveries: list[list[str]],
    delivered_to: str,
) -> Outbox | None:
    """Record where Slack took the message. A parent posted at the top level becomes the
    debate's thread. An update whose content changed meanwhile stays due, to send the newer."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    now = utcnow()
    if row.action == OutboxAction.POST:
        row.deliveries = deliveries
    row.delivered_to = delivered_to
    row.claimed_by, row.claimed_until = None, None
    if row.version != version:
        row.state = OutboxState.PENDING
        row.next_attempt_at = now
    else:
        row.state = OutboxState.SENT
        row.sent_at = now
        row.last_error = None
    session.add(row)
    owned_by_debate = row.debate_id is not None
    if (
        owned_by_debate
        and row.action == OutboxAction.POST
        and row.key.startswith(PARENT)
        and row.target == OutboxTarget.CHANNEL
    ):
        debate = session.get(Debate, row.debate_id)
        assert debate is not None
        debate.thread_ts = deliveries[0][1]
        session.add(debate)
    if owned_by_debate and row.key == REVIEW and deliveries:
        escalation = session.exec(
            select(Escalation).where(Escalation.debate_id == row.debate_id)
        ).one_or_none()
        if escalation is not None:
            escalation.message_ts = deliveries[0][1]
            session.add(escalation)
    session.commit()
    return row


def mark_retry(
    session: Session,
    *,
    row_id: int,
    owner: str,
    error: str,
    delay_s: float,
    failed_attempt: bool = True,
) -> Outbox | None:
    """Try again after `delay_s`; past the row's deadline it is given up (FAILED).
    `failed_attempt=False` for a message that only waits (for the one it updates)."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    now = utcnow()
    row.attempts += int(failed_attempt)
    row.last_error = error
    row.claimed_by, row.claimed_until = None, None
    row.next_attempt_at = now + timedelta(seconds=delay_s)
    row.state = OutboxState.FAILED if row.next_attempt_at > row.deadline_at else OutboxState.PENDING
    session.add(row)
    session.commit()
    return row


def mark_failed(
    session: Session,
    *,
    row_id: int,
    owner: str,
    error: str,
    notices: Sequence[Draft] = (),
) -> Outbox | None:
    """Give the message up for good and owe `notices` about it instead."""
    row = owned(session, row_id, owner)
    if row is None:
        return None
    row.attempts += 1
    row.state = OutboxState.FAILED
    row.last_error = error
    row.claimed_by, row.claimed_until = None, None
    session.add(row)
    if row.debate_id is not None:
        debate = session.get(Debate, row.debate_id)
        assert debate is not None
        stage(session, debate=debate, drafts=notices)
    session.commit()
    return row


def split(
    session: Session, *, row_id: int, owner: str, error: str, parts: Sequence[Draft]
) -> list[Outbox]:
    """Replace a message Slack refused for its size by smaller parts, sent in its place."""
    row = owned(session, row_id, owner)
    if row is None:
        return []
    row.state = OutboxState.SPLIT
    row.last_error = error
    row.claimed_by, row.claimed_until = None, None
    session.add(row)
    now = utcnow()
    made = []
    for number, part in enumerate(parts, 1):
        piece = Outbox(
            debate_id=row.debate_id,
            key=f"{row.key}~{number}",
            seq=row.seq,
            part=number,
            action=row.action,
            target=row.target,
            recipients=list(row.recipients),
            fallback=row.fallback,
            channel_id=row.channel_id,
            text=part.text,
            blocks=part.blocks,
            next_attempt_at=now,
            deadline_at=row.deadline_at,
        )
        session.add(piece)
        made.append(piece)
    session.commit()
    return made


def new_parent(
    session: Session,
    *,
    debate_id: int,
    channel_id: str,
    ts: str,
    text: str,
    blocks: list[dict[str, Any]],
    becomes_thread: bool,
) -> Debate:
    """Record a parent re-posted because the old one (or its thread) was deleted: status
    updates go to it from now on and, when it starts a new thread, so do later posts."""
    debate = session.get(Debate, debate_id)
    assert debate is not None
    parents = session.exec(
        select(func.count())
        .select_from(Outbox)
        .where(Outbox.debate_id == debate_id, col(Outbox.key).like(f"{PARENT}%"))
    ).one()
    key = f"{PARENT}:{int(parents) + 1}"
    now = utcnow()
    session.add(
        Outbox(
            debate_id=debate_id,
            key=key,
            seq=0,
            action=OutboxAction.POST,
            target=OutboxTarget.CHANNEL if becomes_thread else OutboxTarget.THREAD,
            channel_id=channel_id,
            text=text,
            blocks=blocks,
            state=OutboxState.SENT,
            attempts=1,
            deadline_at=now,
            deliveries=[[channel_id, ts]],
            delivered_to="re-created parent",
            sent_at=now,
        )
    )
    session.execute(
        update(Outbox)
        .where(col(Outbox.debate_id) == debate_id, col(Outbox.key) == PARENT_UPDATE)
        .values(target_key=key)
    )
    if becomes_thread:
        debate.thread_ts = ts
        session.add(debate)
    session.commit()
    session.refresh(debate)
    return debate


def halt(session: Session, *, debate_id: int, reason: str, notices: Sequence[Draft]) -> bool:
    """Mark the debate's thread unreachable (its worker stops at the next turn) and owe the
    requester `notices`; False when it was already halted."""
    debate = session.get(Debate, debate_id)
    if debate is None or debate.halt_reason is not None:
        return False
    debate.halt_reason = reason
    debate.updated_at = utcnow()
    session.add(debate)
    stage(session, debate=debate, drafts=notices)
    session.commit()
    return True
