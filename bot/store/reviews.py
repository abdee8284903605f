"""Escalations and their one review decision, and the feedback people give verdicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store import labels, outbox
from bot.store.debate_tables import Debate
from bot.store.errors import DebateNotFoundError
from bot.store.queue import get_debate
from bot.store.receipts import ReceiptIssuer, add_decision, receipt_of
from bot.store.review_tables import Escalation, EscalationState, Feedback, FeedbackValue, Review
from engine.models import utcnow

ReceiptDrafts = Callable[[Debate, Mapping[str, Any]], Sequence[outbox.Draft]]
"""What a debate owes once a decision joined its receipt (given the receipt as handed out):
rendered above the store, handed down."""


def reviews_for(session: Session, *, debate_id: int) -> list[Review]:
    return list(
        session.exec(
            select(Review).where(Review.debate_id == debate_id).order_by(col(Review.created_at))
        )
    )


def escalation_for(session: Session, *, debate_id: int) -> Escalation | None:
    return session.exec(select(Escalation).where(Escalation.debate_id == debate_id)).one_or_none()


def get_escalation(session: Session, *, escalation_id: int) -> Escalation | None:
    return session.get(Escalation, escalation_id)


def review_of(session: Session, *, escalation_id: int) -> Review | None:
    return session.exec(select(Review).where(Review.escalation_id == escalation_id)).one_or_none()


def record_review(
    session: Session,
    *,
    escalation_id: int,
    reviewer: str,
    decision: EscalationState,
    note: str | None,
    decided_at: datetime | None = None,
    drafts: Sequence[outbox.Draft] = (),
    receipts: ReceiptIssuer | None = None,
    receipt_drafts: ReceiptDrafts | None = None,
) -> tuple[Review, bool]:
    """Store the one decision on an escalation (made at `decided_at`, default now), with the
    messages it owes (`drafts`: the review request shown decided), for an Approve or a
    Reject the label it makes for the verdict's confidence, and (with `receipts`) its signed
    statement joined to the debate's receipt, with what `receipt_drafts` owes for the receipt
    as it now stands (its file in the thread); a second click returns the first decision
    (created=False) and owes nothing. DebateNotFoundError when the escalation is gone
    (removed while its reviewer decided)."""
    escalation = session.get(Escalation, escalation_id)
    if escalation is None:
        raise DebateNotFoundError(f"no review request with id {escalation_id}")
    review = Review(
        escalation_id=escalation_id,
        debate_id=escalation.debate_id,
        reviewer=reviewer,
        decision=decision,
        note=note or None,
        created_at=decided_at or utcnow(),
    )
    escalation.state = decision
    session.add(escalation)

    session.add(review)
    try:
        session.flush()
        debate = get_debate(session, debate_id=escalation.debate_id)
        if debate.link:
            debate.pr_comment_due = utcnow()
            session.add(debate)
        outbox.stage(session, debate=debate, drafts=drafts)
        labels.label_review(session, escalation=escalation, decision=decision)
        if receipts is not None:
            add_decision(session, receipts, debate=debate, review=review)
            document = receipt_of(session, debate_id=escalation.debate_id)
            if document is not None and receipt_drafts is not None:
                outbox.stage(session, debate=debate, drafts=receipt_drafts(debate, document))
        session.commit()
    except IntegrityError:
        session.rollback()
        existing = review_of(session, escalation_id=escalation_id)
        assert existing is not None
        return existing, False
    session.refresh(review)
    return review, True


def open_escalations(session: Session) -> list[tuple[Escalation, Debate]]:
    """Every escalation of a Slack debate still waiting for a reviewer, oldest first."""
    rows = session.exec(
        select(Escalation, Debate)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .where(Escalation.state == EscalationState.OPEN, col(Debate.channel_id).is_not(None))
        .order_by(col(Escalation.created_at))
    )
    return [(escalation, debate) for escalation, debate in rows]


def record_feedback(
    session: Session, *, debate_id: int, user_id: str, value: FeedbackValue
) -> tuple[Feedback, bool]:
    """Store one person's thumbs up or down on a debate, with the (weaker) label it makes for
    the verdict's confidence; a second click overwrites both. Returns the row and whether it
    changed anything."""
    for _ in range(2):
        row = session.exec(
            select(Feedback).where(Feedback.debate_id == debate_id, Feedback.user_id == user_id)
        ).one_or_none()
        if row is not None:
            changed = row.value != value
            row.value, row.updated_at = value, utcnow()
            session.add(row)
            labels.label_feedback(session, debate_id=debate_id, user_id=user_id, value=value)
            session.commit()
            return row, changed
        row = Feedback(debate_id=debate_id, user_id=user_id, value=value)
        session.add(row)
        try:
            labels.label_feedback(session, debate_id=debate_id, user_id=user_id, value=value)
            session.commit()
        except IntegrityError:
            # The same person's other click won the insert; update that row instead.
            session.rollback()
            continue
        return row, True
    raise AssertionError("a feedback row neither existed nor could be inserted")


def feedback_counts(session: Session, *, debate_ids: list[int]) -> dict[int, dict[str, int]]:
    """Thumbs up and down per debate: {debate_id: {"positive": n, "negative": m}}."""
    if not debate_ids:
        return {}
    counts: dict[int, dict[str, int]] = {d: {v: 0 for v in FeedbackValue} for d in debate_ids}
    rows = session.exec(
        select(Feedback.debate_id, Feedback.value, func.count())
        .where(col(Feedback.debate_id).in_(debate_ids))
        .group_by(col(Feedback.debate_id), col(Feedback.value))
    )
    for debate_id, value, count in rows:
        counts[debate_id][value] = count
    return counts
