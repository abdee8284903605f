"""Store work of the scheduled jobs and of budgets: job slots, spend, the queue, expired
reviews, stale leases and retention. Keyword-only, like the rest of the store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from bot.store import outbox, refusals
from bot.store.calibration_tables import CalibrationLabel
from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import Debate, DebateState, Turn, VerdictRecord
from bot.store.dedupe_tables import ProcessedTrigger
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.receipt_tables import ReceiptPart
from bot.store.review_tables import Escalation, EscalationState, Feedback, Review
from bot.store.schedule_tables import ScheduledRun
from bot.store.sql import insert_once, rows_changed
from engine.models import Role, utcnow

# --- job slots -------------------------------------------------------------------------------


def claim_slot(session: Session, *, job: str, slot: str, runner: str) -> bool:
    """Record that `runner` runs `job` for `slot`; False when some replica already did."""
    return insert_once(session, ScheduledRun(job=job, slot=slot, runner=runner))


def finish_slot(session: Session, *, job: str, slot: str, outcome: str, detail: str) -> None:
    session.execute(
        update(ScheduledRun)
        .where(col(ScheduledRun.job) == job, col(ScheduledRun.slot) == slot)
        .values(outcome=outcome, detail=detail[:4000], finished_at=utcnow())
    )
    session.commit()


def last_runs(session: Session) -> list[ScheduledRun]:
    """The newest run of each job."""
    newest = (
        select(ScheduledRun.job, func.max(ScheduledRun.started_at).label("at"))
        .group_by(col(ScheduledRun.job))
        .subquery()
    )
    return list(
        session.exec(
            select(ScheduledRun).join(
                newest,
                (col(ScheduledRun.job) == newest.c.job)
                & (col(ScheduledRun.started_at) == newest.c.at),
            )
        )
    )


# --- spend -----------------------------------------------------------------------------------


def month_start(now: datetime) -> datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def spend_since(
    session: Session,
    *,
    since: datetime,
    channel_id: str | None = None,
    requested_by: str | None = None,
) -> float:
    """What the models were paid since `since`: the cost of the turns stored since then (so a
    debate that runs across the 1st counts in the month each turn was bought), in the whole
    workspace, one channel, or the debates one person asked for. The one definition of spend:
    the monthly caps and App Home both read it."""
    query = select(func.coalesce(func.sum(Turn.cost_usd), 0.0)).where(col(Turn.created_at) >= since)
    if channel_id is not None or requested_by is not None:
        query = query.join(Debate, col(Debate.id) == col(Turn.debate_id))
    if channel_id is not None:
        query = query.where(col(Debate.channel_id) == channel_id)
    if requested_by is not None:
        query = query.where(col(Debate.requested_by) == requested_by)
    return float(session.exec(query).one())


# --- the queue -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueDepth:
    waiting: int
    oldest_wait_s: float


def queue_depth(session: Session, *, now: datetime | None = None) -> QueueDepth:
    """Debates a worker could claim now (queued, or running under an expired lease; not those
    of a workspace whose bot token Slack refuses, which wait for the token, not for a worker),
    and how long the longest-waiting one has waited (since it was queued, or since its lease
    ran out)."""
    now = now or utcnow()
    rows = session.exec(
        select(Debate.state, Debate.created_at, Debate.lease_expires_at).where(
            or_(
                col(Debate.state) == DebateState.QUEUED,
                (col(Debate.state) == DebateState.RUNNING) & (col(Debate.lease_expires_at) < now),
            ),
            ~refusals.token_refused(col(Debate.team_id), col(Debate.enterprise_id)),
        )
    ).all()
    waits = [
        (now - (created if state == DebateState.QUEUED or expires is None else expires))
        for state, created, expires in rows
    ]
    oldest = max((w.total_seconds() for w in waits), default=0.0)
    return QueueDepth(waiting=len(rows), oldest_wait_s=max(0.0, oldest))


def requeue_stale(session: Session, *, older_than: datetime) -> list[tuple[int, str | None]]:
    """Debates whose worker stopped renewing its lease before `older_than`: back to the queue,
    their owner cleared. Returns (debate id, the worker that held it)."""
    stale = session.exec(
        select(Debate.id, Debate.lease_owner).where(
            col(Debate.state) == DebateState.RUNNING, col(Debate.lease_expires_at) < older_than
        )
    ).all()
    if stale:
        session.execute(
            update(Debate)
            .where(
                col(Debate.id).in_([debate_id for debate_id, _ in stale]),
                col(Debate.state) == DebateState.RUNNING,
                col(Debate.lease_expires_at) < older_than,
            )
            .values(state=DebateState.QUEUED, lease_owner=None, lease_expires_at=None)
        )
        session.commit()
    return [(int(debate_id), owner) for debate_id, owner in stale if debate_id is not None]


def pr_comments_due(
    session: Session, *, since: datetime, until: datetime, limit: int = 50
) -> list[int]:
    """Debates whose pull request comment fell behind between `since` and `until`, oldest
    first: what the `pr-comments` job syncs again."""
    rows = session.exec(
        select(Debate.id)
        .where(col(Debate.pr_comment_due) >= since, col(Debate.pr_comment_due) <= until)
        .order_by(col(Debate.pr_comment_due))
        .limit(limit)
    ).all()
    return [int(debate_id) for debate_id in rows if debate_id is not None]


def pr_comment_synced(session: Session, *, debate_id: int, seen: datetime) -> bool:
    """Clear the debate's due comment if nothing fell behind since `seen` (a review that came
    in during the sync keeps it due); True when cleared."""
    cleared = session.execute(
        update(Debate)
        .where(col(Debate.id) == debate_id, col(Debate.pr_comment_due) <= seen)
        .values(pr_comment_due=None)
    )
    session.commit()
    return bool(rows_changed(cleared))


def release_stale_sends(session: Session, *, now: datetime) -> int:
    """Outbox rows claimed by a delivery loop that died: pending again."""
    released = session.execute(
        update(Outbox)
        .where(col(Outbox.state) == OutboxState.SENDING, col(Outbox.claimed_until) < now)
        .values(state=OutboxState.PENDING, claimed_by=None, claimed_until=None)
    )
    session.commit()
    return rows_changed(released)


# --- review SLA ------------------------------------------------------------------------------


def overdue_reviews(
    session: Session, *, default_sla_h: float, now: datetime
) -> list[tuple[Escalation, Debate, ChannelSettings | None, float]]:
    """Open reviews older than their channel's SLA, with the SLA (hours) that applies."""
    rows = session.exec(
        select(Escalation, Debate, ChannelSettings)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .join(
            ChannelSettings,
            (col(ChannelSettings.channel_id) == col(Debate.channel_id))
            & (col(ChannelSettings.team_id) == col(Debate.team_id)),
            isouter=True,
        )
        .where(col(Escalation.state) == EscalationState.OPEN, col(Debate.channel_id).is_not(None))
    ).all()
    overdue: list[tuple[Escalation, Debate, ChannelSettings | None, float]] = []
    for escalation, debate, channel in rows:
        sla_h = channel.review_sla_h if channel and channel.review_sla_h else default_sla_h
        if now - escalation.created_at >= timedelta(hours=sla_h):
            overdue.append((escalation, debate, channel, sla_h))
    return overdue


def expire_review(session: Session, *, escalation_id: int, drafts: Sequence[outbox.Draft]) -> bool:
    """Mark an open review expired with the messages that announce it, in one transaction;
    False when it was decided (or expired by another replica) meanwhile."""
    changed = session.execute(
        update(Escalation)
        .where(col(Escalation.id) == escalation_id, col(Escalation.state) == EscalationState.OPEN)
        .values(state=EscalationState.EXPIRED)
    )
    if not rows_changed(changed):
        session.rollback()
        return False
    escalation = session.get(Escalation, escalation_id)
    assert escalation is not None
    debate = session.get(Debate, escalation.debate_id)
    assert debate is not None
    outbox.stage(session, debate=debate, drafts=drafts)
    session.commit()
    return True


# --- the daily digest ------------------------------------------------------------------------


def digest_channels(session: Session) -> list[ChannelSettings]:
    return list(
        session.exec(select(ChannelSettings).where(col(ChannelSettings.digest_time).is_not(None)))
    )


@dataclass(frozen=True)
class ChannelDay:
    """What a channel's digest says."""

    debates: int
    decisions: dict[str, int]
    escalated: int
    open_reviews: int
    month_spend_usd: float
    budget_usd: float | None


def channel_day(
    session: Session, *, channel: ChannelSettings, since: datetime, now: datetime
) -> ChannelDay:
    cid = channel.channel_id
    debates = session.exec(
        select(func.count()).where(col(Debate.channel_id) == cid, col(Debate.created_at) >= since)
    ).one()
    decided = session.exec(
        select(VerdictRecord.decision, func.count())
        .join(Debate, col(Debate.id) == col(VerdictRecord.debate_id))
        .where(col(Debate.channel_id) == cid, col(VerdictRecord.created_at) >= since)
        .group_by(col(VerdictRecord.decision))
    ).all()
    escalated = session.exec(
        select(func.count())
        .select_from(Escalation)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .where(
            col(Debate.channel_id) == cid,
            col(Escalation.created_at) >= since,
            col(Escalation.sample).is_(False),
        )
    ).one()
    open_reviews = session.exec(
        select(func.count())
        .select_from(Escalation)
        .join(Debate, col(Debate.id) == col(Escalation.debate_id))
        .where(col(Debate.channel_id) == cid, col(Escalation.state) == EscalationState.OPEN)
    ).one()
    return ChannelDay(
        debates=int(debates),
        decisions={str(decision): int(n) for decision, n in decided},
        escalated=int(escalated),
        open_reviews=int(open_reviews),
        month_spend_usd=spend_since(session, since=month_start(now), channel_id=cid),
        budget_usd=channel.monthly_budget_usd,
    )


# --- retention -------------------------------------------------------------------------------


def expired_debates(session: Session, *, before: datetime, limit: int) -> list[int]:
    """Ended debates last changed before `before` that nothing newer still points to (a
    follow-up round carries its parent's id, so a parent goes with or after its follow-ups)."""
    child = select(Debate.parent_debate_id).where(col(Debate.parent_debate_id).is_not(None))
    rows = session.exec(
        select(Debate.id)
        .where(
            col(Debate.state) == DebateState.FINISHED,
            col(Debate.updated_at) < before,
            col(Debate.id).not_in(child),
        )
        .order_by(col(Debate.id))
        .limit(limit)
    ).all()
    return [int(debate_id) for debate_id in rows if debate_id is not None]


def remove_debate(session: Session, *, debate_id: int) -> None:
    """Delete a debate and everything that hangs off it, in one transaction."""
    escalations = select(Escalation.id).where(col(Escalation.debate_id) == debate_id)
    for statement in (
        delete(Review).where(col(Review.escalation_id).in_(escalations)),
        delete(Review).where(col(Review.debate_id) == debate_id),
        delete(Escalation).where(col(Escalation.debate_id) == debate_id),
        delete(Feedback).where(col(Feedback.debate_id) == debate_id),
        delete(Outbox).where(col(Outbox.debate_id) == debate_id),
        delete(ReceiptPart).where(col(ReceiptPart.debate_id) == debate_id),
        delete(VerdictRecord).where(col(VerdictRecord.debate_id) == debate_id),
        delete(Turn).where(col(Turn.debate_id) == debate_id),
        update(ProcessedTrigger)
        .where(col(ProcessedTrigger.debate_id) == debate_id)
        .values(debate_id=None),
        # A label keeps what it copied from the verdict, so calibration outlives retention.
        update(CalibrationLabel)
        .where(col(CalibrationLabel.debate_id) == debate_id)
        .values(debate_id=None),
        delete(Debate).where(col(Debate.id) == debate_id),
    ):
        session.execute(statement)
    session.commit()


# --- the dashboard (`debatebot stats`) -------------------------------------------------------


@dataclass
class Dashboard:
    """What `debatebot stats` prints beside the per-protocol counts, over one period."""

    since: str | None
    channel: str | None
    verdict_levels: dict[str, int]
    low_confidence_share: float | None
    escalation_rate: float | None
    critic_strength: dict[int, int]
    by_role: dict[str, dict[str, float]]
    latency_by_model: dict[str, dict[str, float]]
    cost_by_task_type: dict[str, dict[str, float]]
    reviews: dict[str, float | int | None]
    feedback: dict[str, int]
    queue: dict[str, float]
    jobs: dict[str, dict[str, str | None]]


def _debates_in(since: datetime | None, channel_id: str | None) -> Any:
    query = select(Debate.id)
    if since is not None:
        query = query.where(col(Debate.created_at) >= since)
    if channel_id is not None:
        query = query.where(col(Debate.channel_id) == channel_id)
    return query


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _tally(session: Session, value: Any, debate_id: Any, ids: Any) -> dict[str, int]:
    """How many rows hold each `value` (a column, as its model names it), among the rows whose
    `debate_id` column is one of the debates `ids` selects."""
    query = sa_select(col(value), func.count()).where(col(debate_id).in_(ids)).group_by(col(value))
    return {str(held): int(n) for held, n in session.execute(query)}


def dashboard(
    session: Session, *, since: datetime | None = None, channel_id: str | None = None
) -> Dashboard:
    """The operator's dashboard from the stored rows: verdict confidence, escalation rate,
    the critic's challenge strength, tokens, cost and latency, reviews, feedback, the queue."""
    ids = _debates_in(since, channel_id)
    levels = _tally(session, VerdictRecord.level, VerdictRecord.debate_id, ids)
    verdicts = sum(levels.values())
    escalated = int(
        session.exec(
            select(func.count())
            .select_from(Escalation)
            .where(col(Escalation.debate_id).in_(ids), col(Escalation.sample).is_(False))
        ).one()
    )
    strength: dict[int, int] = {}
    by_role: dict[str, dict[str, float]] = {}
    latency: dict[str, list[float]] = {}
    # sqlmodel's select types at most four columns; SQLAlchemy's takes any number.
    turns = session.execute(
        sa_select(
            col(Turn.role),
            col(Turn.provider),
            col(Turn.model),
            col(Turn.input_tokens),
            col(Turn.cached_input_tokens),
            col(Turn.output_tokens),
            col(Turn.cost_usd),
            col(Turn.latency_s),
            col(Turn.parsed_json),
        ).where(col(Turn.debate_id).in_(ids))
    )
    for role, provider, model, tokens_in, cached, tokens_out, cost, seconds, parsed in turns:
        row = by_role.setdefault(
            role, {"turns": 0, "input": 0, "cached_input": 0, "output": 0, "cost_usd": 0.0}
        )
        row["turns"] += 1
        row["input"] += tokens_in
        row["cached_input"] += cached
        row["output"] += tokens_out
        row["cost_usd"] += cost
        latency.setdefault(f"{provider}:{model}", []).append(seconds)
        if role == Role.CRITIC:
            value = json.loads(parsed).get("challenge_strength")
            if isinstance(value, int):
                strength[value] = strength.get(value, 0) + 1
    per_task: dict[str, dict[str, float]] = {}
    for spec_json, cost in session.exec(
        select(Debate.spec_json, Debate.cost_usd).where(col(Debate.id).in_(ids))
    ):
        task = json.loads(spec_json).get("task_type") or "unspecified"
        entry = per_task.setdefault(task, {"debates": 0, "cost_usd": 0.0})
        entry["debates"] += 1
        entry["cost_usd"] += cost
    for entry in per_task.values():
        entry["cost_per_debate_usd"] = entry["cost_usd"] / entry["debates"]
    waits = sorted(
        (review_at - asked_at).total_seconds() / 3600
        for review_at, asked_at in session.exec(
            select(Review.created_at, Escalation.created_at)
            .join(Escalation, col(Escalation.id) == col(Review.escalation_id))
            .where(col(Escalation.debate_id).in_(ids))
        )
    )
    states = _tally(session, Escalation.state, Escalation.debate_id, ids)
    feedback = _tally(session, Feedback.value, Feedback.debate_id, ids)
    depth = queue_depth(session)
    return Dashboard(
        since=since.isoformat() if since else None,
        channel=channel_id,
        verdict_levels=levels,
        low_confidence_share=_share(levels.get("LOW", 0), verdicts),
        escalation_rate=_share(escalated, verdicts),
        critic_strength=dict(sorted(strength.items())),
        by_role=by_role,
        latency_by_model={
            name: {
                "turns": len(values),
                "mean_s": sum(values) / len(values),
                "p95_s": sorted(values)[max(0, int(len(values) * 0.95) - 1)],
            }
            for name, values in sorted(latency.items())
        },
        cost_by_task_type=per_task,
        reviews={
            "decided": len(waits),
            "median_turnaround_h": waits[len(waits) // 2] if waits else None,
            "open": states.get(EscalationState.OPEN.value, 0),
            "expired": states.get(EscalationState.EXPIRED.value, 0),
        },
        feedback=feedback,
        queue={"waiting": depth.waiting, "oldest_wait_s": depth.oldest_wait_s},
        jobs={
            run.job: {
                "slot": run.slot,
                "outcome": run.outcome,
                "detail": run.detail,
                "runner": run.runner,
            }
            for run in last_runs(session)
        },
    )
