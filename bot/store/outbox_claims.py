"""Claims and leases on the outbox: which lanes have a message due, claiming a lane's head
(or a debate's due updates) with an expiring claim so that any number of processes deliver from
one database, and handing claimed messages back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy import select as sql_select
from sqlmodel import Session, col, select

from bot.store import refusals
from bot.store.debate_tables import Debate
from bot.store.outbox import REVIEW, row_for
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxState
from bot.store.sql import rows_changed
from engine.models import utcnow

OPEN_STATES = (OutboxState.PENDING, OutboxState.SENDING)


def due(now: datetime) -> Any:
    """The condition of a row due at `now`: pending and past its next attempt, or claimed by a
    process whose claim has run out (it died mid-send)."""
    return or_(
        (col(Outbox.state) == OutboxState.PENDING) & (col(Outbox.next_attempt_at) <= now),
        (col(Outbox.state) == OutboxState.SENDING) & (col(Outbox.claimed_until) < now),
    )


@dataclass(frozen=True, order=True)
class Lane:
    """Messages delivered one after another: a debate's posts, a debate's updates, or the posts
    owed to a channel with no debate (`debate_id` None; `channel` names it)."""

    debate_id: int | None
    channel: str
    action: OutboxAction
    team_id: str = ""
    """The workspace the lane's messages go to (its bot token posts them)."""
    enterprise_id: str | None = None


def due_lanes(session: Session) -> list[Lane]:
    """Every lane with a message due now: first the lanes of debates that still owe their
    review request (after an outage they go first, so reviewers hear soonest), then by debate.
    A workspace whose bot token Slack refuses has none: what it is owed is held
    (bot.store.refusals)."""
    rows = session.execute(
        sql_select(
            col(Outbox.debate_id),
            col(Outbox.channel_id),
            col(Outbox.action),
            col(Outbox.team_id),
            col(Outbox.enterprise_id),
        )
        .where(
            due(utcnow()),
            ~refusals.token_refused(col(Outbox.team_id), col(Outbox.enterprise_id)),
        )
        .distinct()
    ).all()
    lanes = {
        Lane(None, channel, OutboxAction(action), team or "", enterprise)
        if debate_id is None
        else Lane(int(debate_id), "", OutboxAction(action), team or "", enterprise)
        for debate_id, channel, action, team, enterprise in rows
    }
    reviewing = set(
        session.exec(
            select(Outbox.debate_id).where(Outbox.key == REVIEW, col(Outbox.state).in_(OPEN_STATES))
        ).all()
    )
    return sorted(
        lanes,
        key=lambda lane: (
            lane.debate_id not in reviewing,
            lane.debate_id or 0,
            lane.channel,
            lane.action,
        ),
    )


def claim_channel_head(
    session: Session, *, channel_id: str, team_id: str, owner: str, claim_s: float
) -> Outbox | None:
    """Claim the first undelivered post owed to the channel of workspace `team_id` with no
    debate, if it is due."""
    head = session.exec(
        select(Outbox)
        .where(
            col(Outbox.debate_id).is_(None),
            Outbox.channel_id == channel_id,
            Outbox.team_id == team_id,
            col(Outbox.state).in_(OPEN_STATES),
        )
        .order_by(col(Outbox.id))
        .limit(1)
    ).one_or_none()
    return None if head is None else _claim(session, head, owner, claim_s)


def _claim(session: Session, row: Outbox, owner: str, claim_s: float) -> Outbox | None:
    now = utcnow()
    claimed = session.execute(
        update(Outbox)
        .where(col(Outbox.id) == row.id, due(now))
        .values(
            state=OutboxState.SENDING,
            claimed_by=owner,
            claimed_until=now + timedelta(seconds=claim_s),
        )
        .returning(col(Outbox.id))
    ).scalar_one_or_none()
    session.commit()
    if claimed is None:
        return None
    session.refresh(row)
    return row


def claim_head(
    session: Session, *, debate_id: int, owner: str, claim_s: float
) -> tuple[Outbox, Debate] | None:
    """Claim the first undelivered post of the debate if it is due; None when there is none
    or it is waiting for a retry (later posts wait behind it, keeping the thread in order)."""
    head = session.exec(
        select(Outbox)
        .where(
            Outbox.debate_id == debate_id,
            Outbox.action == OutboxAction.POST,
            col(Outbox.state).in_(OPEN_STATES),
        )
        .order_by(col(Outbox.seq), col(Outbox.part), col(Outbox.id))
        .limit(1)
    ).one_or_none()
    return claimed_with_debate(session, head, owner, claim_s)


def claimed_with_debate(
    session: Session, row: Outbox | None, owner: str, claim_s: float
) -> tuple[Outbox, Debate] | None:
    """`row` claimed, with its debate; None when there is no row or another owner has it."""
    claimed = None if row is None else _claim(session, row, owner, claim_s)
    if claimed is None:
        return None
    debate = session.get(Debate, claimed.debate_id)
    assert debate is not None
    return claimed, debate


def claim_updates(
    session: Session, *, debate_id: int, owner: str, claim_s: float
) -> list[tuple[Outbox, Outbox | None]]:
    """Claim every due update of the debate, each with the row of the message it changes."""
    rows = session.exec(
        select(Outbox).where(
            Outbox.debate_id == debate_id, Outbox.action == OutboxAction.UPDATE, due(utcnow())
        )
    ).all()
    claimed: list[tuple[Outbox, Outbox | None]] = []
    for row in rows:
        mine = _claim(session, row, owner, claim_s)
        if mine is not None:
            target = row_for(session, debate_id=debate_id, key=mine.target_key or "")
            claimed.append((mine, target))
    return claimed


def owned(session: Session, row_id: int, owner: str) -> Outbox | None:
    """The row if `owner` still holds its claim, else None (its claim ran out and another
    process took it over: what this one learnt is not recorded)."""
    row = session.get(Outbox, row_id)
    if row is None or row.claimed_by != owner or row.state != OutboxState.SENDING:
        session.rollback()
        return None
    return row


def release(session: Session, *, row_id: int, owner: str) -> None:
    """Hand a claimed message back, due at once (the process is stopping)."""
    row = owned(session, row_id, owner)
    if row is None:
        return
    row.state = OutboxState.PENDING
    row.claimed_by, row.claimed_until = None, None
    session.add(row)
    session.commit()


def release_lane(session: Session, *, owner: str, lane: Lane) -> int:
    """Hand back what `owner` holds of one lane, due at once, no attempt counted (Slack refused
    the bot token: no message is at fault, and none is given up). Only that lane's: another
    lane of the workspace may have its message at Slack, taken, and must record it as sent
    rather than find it handed back and send it again."""
    statement = update(Outbox).where(
        col(Outbox.state) == OutboxState.SENDING,
        col(Outbox.claimed_by) == owner,
        col(Outbox.action) == lane.action,
    )
    if lane.debate_id is not None:
        statement = statement.where(col(Outbox.debate_id) == lane.debate_id)
    else:
        statement = statement.where(
            col(Outbox.debate_id).is_(None),
            col(Outbox.channel_id) == lane.channel,
            col(Outbox.team_id) == lane.team_id,
        )
    released = session.execute(
        statement.values(state=OutboxState.PENDING, claimed_by=None, claimed_until=None)
    )
    session.commit()
    return rows_changed(released)


def pull_in_retries(session: Session) -> int:
    """Slack answered again after failures: make every message waiting on a retry due now."""
    now = utcnow()
    moved = session.execute(
        update(Outbox)
        .where(
            col(Outbox.state) == OutboxState.PENDING,
            col(Outbox.attempts) > 0,
            col(Outbox.next_attempt_at) > now,
        )
        .values(next_attempt_at=now)
    )
    session.commit()
    return rows_changed(moved)
