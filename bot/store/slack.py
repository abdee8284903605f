"""Repository functions for the Slack surface: channel settings, the message ledger, escalations,
reviews, forked debates and the App Home queries. Keyword-only, one unit of work each.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, true, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.audit import GENESIS_HASH, turn_digest
from bot.store.repository import get_debate, insert_once, turn_rows
from bot.store.tables import (
    ChannelSettings,
    Debate,
    Escalation,
    EscalationState,
    ProcessedTrigger,
    Review,
    SlackPost,
    Turn,
)
from engine.models import DebateSpec, utcnow

CHANNEL_SETTING_FIELDS = (
    "protocol",
    "rounds",
    "threshold",
    "reviewers",
    "owners",
    "budget_usd",
    "adr_watch",
    "trigger_reaction",
)


def channel_settings(session: Session, *, channel_id: str) -> ChannelSettings:
    """The channel's stored settings, or the defaults (not stored) when it has none."""
    stored = session.get(ChannelSettings, channel_id)
    return stored if stored is not None else ChannelSettings(channel_id=channel_id)


def save_channel_settings(
    session: Session, *, channel_id: str, updated_by: str, values: dict[str, Any]
) -> ChannelSettings:
    """Create or update the channel's settings with `values` (only known fields)."""
    unknown = set(values) - set(CHANNEL_SETTING_FIELDS)
    if unknown:
        raise ValueError(f"unknown channel settings: {', '.join(sorted(unknown))}")
    row = session.get(ChannelSettings, channel_id) or ChannelSettings(channel_id=channel_id)
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_by = updated_by
    row.updated_at = utcnow()
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def mark_processed(session: Session, *, key: str, debate_id: int | None = None) -> bool:
    """Remember a Slack event id (or other trigger key); False when it was seen before."""
    session.add(ProcessedTrigger(key=key, debate_id=debate_id))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def reserve_post(
    session: Session,
    *,
    debate_id: int,
    key: str,
    channel_id: str,
    owner: str,
    stale_after_s: float = 120.0,
    take_over: bool = False,
) -> tuple[SlackPost, bool]:
    """Reserve the right to post message `key` of a debate; (row, True) when the caller should post.

    A reservation that never got its ts (its poster died) is taken over after `stale_after_s`, or
    at once with `take_over` (the caller holds the debate's lease, so the reserver is gone).
    """
    row = SlackPost(debate_id=debate_id, key=key, channel_id=channel_id, reserved_by=owner)
    session.add(row)
    try:
        session.commit()
        session.refresh(row)
        return row, True
    except IntegrityError:
        session.rollback()
    now = utcnow()
    taken = session.execute(
        update(SlackPost)
        .where(
            col(SlackPost.debate_id) == debate_id,
            col(SlackPost.key) == key,
            col(SlackPost.ts).is_(None),
            col(SlackPost.reserved_by) != owner,
            (col(SlackPost.reserved_at) < now - timedelta(seconds=stale_after_s))
            if not take_over
            else true(),
        )
        .values(reserved_by=owner, reserved_at=now)
        .returning(col(SlackPost.id))
    ).scalar_one_or_none()
    session.commit()
    existing = session.exec(
        select(SlackPost).where(SlackPost.debate_id == debate_id, SlackPost.key == key)
    ).one()
    return existing, taken is not None


def complete_post(session: Session, *, post_id: int, ts: str) -> None:
    row = session.get(SlackPost, post_id)
    assert row is not None
    row.ts = ts
    row.posted_at = utcnow()
    session.add(row)
    session.commit()


def release_post(session: Session, *, post_id: int) -> None:
    """Drop a reservation whose post failed, so a later attempt may post it."""
    row = session.get(SlackPost, post_id)
    if row is not None and row.ts is None:
        session.delete(row)
        session.commit()


def post_for(session: Session, *, debate_id: int, key: str) -> SlackPost | None:
    return session.exec(
        select(SlackPost).where(SlackPost.debate_id == debate_id, SlackPost.key == key)
    ).one_or_none()


def set_thread(session: Session, *, debate_id: int, thread_ts: str) -> Debate:
    debate = get_debate(session, debate_id=debate_id)
    debate.thread_ts = thread_ts
    debate.updated_at = utcnow()
    session.add(debate)
    session.commit()
    session.refresh(debate)
    return debate


def open_escalation(
    session: Session, *, debate_id: int, reasons: list[str], reviewers: list[str]
) -> tuple[Escalation, bool]:
    """The debate's escalation, created on first call; (row, created)."""
    return insert_once(
        session,
        Escalation(debate_id=debate_id, reasons=reasons, reviewers=reviewers),
        lambda: session.exec(select(Escalation).where(Escalation.debate_id == debate_id)).one(),
    )


def set_escalation_message(session: Session, *, escalation_id: int, ts: str) -> None:
    row = session.get(Escalation, escalation_id)
    assert row is not None
    row.message_ts = ts
    session.add(row)
    session.commit()


def get_escalation(session: Session, *, escalation_id: int) -> Escalation | None:
    return session.get(Escalation, escalation_id)


def review_of(session: Session, *, escalation_id: int) -> Review | None:
    return session.exec(select(Review).where(Review.escalation_id == escalation_id)).one_or_none()


def record_review(
    session: Session, *, escalation_id: int, reviewer: str, decision: str, note: str | None
) -> tuple[Review, bool]:
    """Store the one decision on an escalation; a second click returns the first (created=False)."""
    escalation = session.get(Escalation, escalation_id)
    assert escalation is not None
    review = Review(
        escalation_id=escalation_id,
        debate_id=escalation.debate_id,
        reviewer=reviewer,
        decision=decision,
        note=note or None,
    )
    escalation.state = EscalationState(decision).value
    session.add(escalation)

    def first_review() -> Review:
        existing = review_of(session, escalation_id=escalation_id)
        assert existing is not None
        return existing

    return insert_once(session, review, first_review)


def fork_debate(
    session: Session, *, debate_id: int, trigger_key: str, spec: DebateSpec
) -> tuple[Debate, bool]:
    """A follow-up debate that carries the original's turns and thread messages forward.

    The turns are copied (re-chained under the new debate), so the engine replays them instead of
    asking a model again; the parent and round messages are shared, so nothing is re-posted.
    """
    existing = session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one_or_none()
    if existing is not None:
        return existing, False
    original = get_debate(session, debate_id=debate_id)
    fork = Debate(
        trigger_key=trigger_key,
        source="another_round",
        channel_id=original.channel_id,
        thread_ts=original.thread_ts,
        requested_by=original.requested_by,
        parent_debate_id=original.id,
        question=spec.question,
        protocol=spec.protocol,
        spec_json=spec.model_dump_json(),
    )
    session.add(fork)
    try:
        session.flush()
        assert fork.id is not None
        prev = GENESIS_HASH
        for row in turn_rows(session, debate_id=debate_id):
            fields = row.model_dump(exclude={"id", "debate_id", "prev_hash", "hash"})
            copy = Turn(**fields, debate_id=fork.id, prev_hash=prev, hash="")
            copy.hash = turn_digest(copy, prev)
            prev = copy.hash
            session.add(copy)
        shared = session.exec(select(SlackPost).where(SlackPost.debate_id == debate_id))
        for post in shared:
            if post.ts is not None and (post.key == "parent" or post.key.startswith("round:")):
                fields = post.model_dump(exclude={"id", "debate_id"})
                session.add(SlackPost(**fields, debate_id=fork.id))
        session.commit()
    except IntegrityError:
        session.rollback()
        return session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one(), False
    session.refresh(fork)
    return fork, True


def open_escalations(session: Session) -> list[tuple[Escalation, Debate]]:
    """Every escalation still waiting for a reviewer, oldest first, with its debate."""
    rows = session.exec(
        select(Escalation, Debate)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .where(Escalation.state == EscalationState.OPEN)
        .order_by(col(Escalation.created_at))
    )
    return [(escalation, debate) for escalation, debate in rows]


def recent_debates(session: Session, *, channel_ids: list[str], limit: int = 10) -> list[Debate]:
    if not channel_ids:
        return []
    return list(
        session.exec(
            select(Debate)
            .where(col(Debate.channel_id).in_(channel_ids))
            .order_by(col(Debate.id).desc())
            .limit(limit)
        )
    )


def spend_since(session: Session, *, since: datetime, requested_by: str | None = None) -> float:
    """Model spend of debates created since `since` (all of them, or one requester's)."""
    query = select(func.coalesce(func.sum(Debate.cost_usd), 0.0)).where(
        col(Debate.created_at) >= since
    )
    if requested_by is not None:
        query = query.where(Debate.requested_by == requested_by)
    return float(session.exec(query).one())
