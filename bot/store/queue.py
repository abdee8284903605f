"""The debate queue: admission (debates in flight, monthly spend), enqueueing once per trigger,
claims and leases, and follow-up debates that carry an earlier one forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, text, update
from sqlalchemy import select as sql_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store import operations, outbox, refusals
from bot.store.audit import (
    GENESIS_HASH,
    turn_digest,
)
from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import Debate, DebateSource, DebateState, TriageState, Turn
from bot.store.errors import (
    BudgetExceededError,
    DebateNotFoundError,
    InFlightLimitError,
    LeaseLostError,
)
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxState
from bot.store.tenancy import workspace_of
from bot.store.turns import turn_rows
from engine.models import DebateSpec, utcnow


@dataclass(frozen=True)
class InFlightLimits:
    """How many debates one person, and one channel, may have queued or running at once."""

    per_user: int
    per_channel: int


def _within_limits(
    session: Session, *, limits: InFlightLimits, requested_by: str | None, channel_id: str | None
) -> None:
    """Count in the inserting transaction, so concurrent requests cannot both slip under a
    limit: SQLite has one writer at a time; PostgreSQL takes a transaction advisory lock per
    person and per channel (in a fixed order, so two requests never deadlock)."""
    team = workspace_of(session).team_id
    keys = sorted(
        f"{team}:{key}"
        for key in [f"channel:{channel_id}", *([f"user:{requested_by}"] if requested_by else [])]
    )
    if session.get_bind().dialect.name == "postgresql":
        for key in keys:
            session.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
            )
    active = col(Debate.state).in_((DebateState.QUEUED.value, DebateState.RUNNING.value))
    count = select(func.count()).select_from(Debate).where(active)
    checks = [("channel", Debate.channel_id == channel_id, limits.per_channel)]
    if requested_by is not None:
        checks.insert(0, ("user", Debate.requested_by == requested_by, limits.per_user))
    for scope, where, limit in checks:
        current = int(session.exec(count.where(where)).one())
        if current >= limit:
            session.rollback()
            raise InFlightLimitError(
                f"{current} debates of this {scope} are queued or running (limit {limit})",
                scope=scope,
                count=current,
                limit=limit,
            )


@dataclass(frozen=True)
class SpendCaps:
    """Monthly spending caps (calendar month, UTC): the workspace's, and each channel's own
    (its `monthly_budget_usd` setting)."""

    workspace_usd: float | None = None


def _within_budget(
    session: Session, *, caps: SpendCaps, channel_id: str | None, ceiling: float
) -> None:
    """Refuse a debate whose cost ceiling, added to this month's spend (from the stored
    turns), could pass the channel's or the workspace's cap."""
    since = operations.month_start(utcnow())
    team = workspace_of(session).team_id
    channel = session.get(ChannelSettings, (team, channel_id)) if channel_id else None
    checks: list[tuple[str, float | None, str | None]] = [("workspace", caps.workspace_usd, None)]
    if channel is not None and channel.monthly_budget_usd is not None:
        checks.insert(0, ("channel", channel.monthly_budget_usd, channel_id))
    for scope, cap, where in checks:
        if cap is None:
            continue
        spent = operations.spend_since(session, since=since, channel_id=where)
        if spent + ceiling > cap or spent >= cap:
            session.rollback()
            raise BudgetExceededError(
                f"the {scope} has spent ${spent:.2f} of its ${cap:.2f} monthly cap",
                scope=scope,
                cap=cap,
                spent=spent,
                ceiling=ceiling,
            )


@dataclass(frozen=True)
class NewDebate:
    """A debate to queue, as the intake admitted it: the spec it runs, what asked for it, where
    it lives in Slack, and whose reviewers decide it (`reviewers_channel_id`, the server's
    choice; see `Debate.reviewers_channel_id`). With `triage` its worker first asks whether a
    debate is warranted at all."""

    trigger_key: str
    spec: DebateSpec
    source: DebateSource
    channel_id: str | None = None
    thread_ts: str | None = None
    requested_by: str | None = None
    triage: bool = False
    parent_debate_id: int | None = None
    review_channel_id: str | None = None
    reviewers_channel_id: str | None = None
    link: str | None = None


def add_debate(
    session: Session,
    *,
    new: NewDebate,
    limits: InFlightLimits | None = None,
    caps: SpendCaps | None = None,
) -> tuple[Debate, bool]:
    """Add a queued debate in the caller's unit of work (flushed, not committed), so the caller
    stages the messages it owes and commits them together: a queued debate never lacks its
    parent message. Or return the debate already made for the trigger key (created False,
    nothing pending).

    The key is the workspace's (one per trigger key and team): another workspace's debate with
    the same key (a channel shared by both, an id Slack reuses) is neither found nor blocking.
    The unique key, not a prior lookup, decides: two concurrent requests with one key yield one
    debate. With `limits`, a new debate past the person's or channel's debates in flight raises
    InFlightLimitError; with `caps`, one whose cost ceiling could pass a monthly cap raises
    BudgetExceededError (both counted in this transaction).
    """
    workspace_of(session)
    key = new.trigger_key
    existing = debate_for_key(session, trigger_key=key)
    if existing is not None:
        return existing, False
    if limits is not None:
        _within_limits(
            session, limits=limits, requested_by=new.requested_by, channel_id=new.channel_id
        )
    if caps is not None:
        ceiling = new.spec.budget_usd or 0.0
        _within_budget(session, caps=caps, channel_id=new.channel_id, ceiling=ceiling)
    debate = Debate(
        trigger_key=key,
        source=new.source,
        channel_id=new.channel_id,
        thread_ts=new.thread_ts,
        requested_by=new.requested_by,
        parent_debate_id=new.parent_debate_id,
        review_channel_id=new.review_channel_id,
        reviewers_channel_id=new.reviewers_channel_id,
        link=new.link,
        question=new.spec.question,
        protocol=new.spec.protocol,
        spec_json=new.spec.model_dump_json(),
        triage=TriageState.PENDING if new.triage else None,
    )
    session.add(debate)
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        made = debate_for_key(session, trigger_key=key)
        if made is None:
            raise  # refused for another reason than its key
        return made, False
    return debate, True


def check_admission(
    session: Session,
    *,
    new: NewDebate,
    limits: InFlightLimits | None = None,
    caps: SpendCaps | None = None,
) -> None:
    """Whether `new` would pass `limits` or `caps` as they stand now, read only: the intake
    refuses before anything is recorded (a follow-up before its review decision is stored);
    `add_debate` counts again when it inserts. A debate already made for the key passes."""
    if debate_for_key(session, trigger_key=new.trigger_key) is not None:
        return
    if limits is not None:
        _within_limits(
            session, limits=limits, requested_by=new.requested_by, channel_id=new.channel_id
        )
    if caps is not None:
        _within_budget(
            session, caps=caps, channel_id=new.channel_id, ceiling=new.spec.budget_usd or 0.0
        )
    session.rollback()


def debate_for_key(session: Session, *, trigger_key: str) -> Debate | None:
    """The session's workspace's debate for `trigger_key`, if any (the store's filter keeps the
    lookup to the workspace, bot.store.tenancy). A single-workspace bot also reads the rows
    still waiting for its id, where the oldest is the one the key made first."""
    query = select(Debate).where(Debate.trigger_key == trigger_key).order_by(col(Debate.id))
    return session.exec(query.limit(1)).first()


def enqueue_debate(
    session: Session,
    *,
    new: NewDebate,
    limits: InFlightLimits | None = None,
    caps: SpendCaps | None = None,
) -> tuple[Debate, bool]:
    """`add_debate`, committed: for a debate that owes no messages (the CLI's, a benchmark's)."""
    debate, created = add_debate(session, new=new, limits=limits, caps=caps)
    if created:
        session.commit()
        session.refresh(debate)
    return debate, created


def get_debate(session: Session, *, debate_id: int) -> Debate:
    debate = session.get(Debate, debate_id)
    if debate is None:
        raise DebateNotFoundError(f"no debate with id {debate_id}")
    return debate


CLAIM_CANDIDATES = 4
"""A claim ranks this many candidates per debate it may take, so one that another worker locked
or took meanwhile leaves others to take."""


def claim_debates(
    session: Session,
    *,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
    debate_id: int | None = None,
) -> list[Debate]:
    """Take up to `limit` claimable debates (queued, or running with an expired lease; not
    suspended, and not of a workspace whose bot token Slack refuses: bot.store.refusals),
    fairly across workspaces; with `debate_id`, that debate only (the CLI runs the debate it
    queued).

    Fair: the workspaces with the fewest debates running go first, each workspace's oldest
    first, then round-robin (every workspace's second before anyone's third), so a workspace
    with hundreds queued does not hold back another's first debate past one claim.

    The ranked candidates are locked `FOR UPDATE SKIP LOCKED` (PostgreSQL; SQLite has one
    writer at a time anyway) and checked claimable again, so concurrent workers never wait on
    or take the same debate; then the locked ones are leased in one statement.
    """
    now = utcnow()
    claimable = or_(
        col(Debate.state) == DebateState.QUEUED,
        (col(Debate.state) == DebateState.RUNNING) & (col(Debate.lease_expires_at) < now),
    ) & col(Debate.suspended_at).is_(None)
    # Nothing it would post could be delivered, and it would be paid for.
    claimable = claimable & ~refusals.token_refused(col(Debate.team_id), col(Debate.enterprise_id))
    if debate_id is not None:
        ranked = [debate_id]
    else:
        ranked = _fair_candidates(session, claimable=claimable, count=limit * CLAIM_CANDIDATES)
    if not ranked:
        session.commit()
        return []
    locked = set(
        session.exec(
            select(Debate.id)
            .where(claimable, col(Debate.id).in_(ranked))
            .with_for_update(skip_locked=True)
        ).all()
    )
    chosen = [candidate for candidate in ranked if candidate in locked][:limit]
    if not chosen:
        session.commit()
        return []
    claimed = session.scalars(
        update(Debate)
        .where(col(Debate.id).in_(chosen))
        .values(
            state=DebateState.RUNNING,
            lease_owner=worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
            claims=col(Debate.claims) + 1,
            updated_at=now,
        )
        .returning(Debate)
        .execution_options(synchronize_session=False)
    ).all()
    session.commit()
    order = {candidate: index for index, candidate in enumerate(chosen)}
    return sorted(claimed, key=lambda debate: order.get(debate.id or 0, 0))


def _fair_candidates(session: Session, *, claimable: Any, count: int) -> list[int]:
    """Up to `count` claimable debates' ids in the order they should be taken (see
    `claim_debates`): by their workspace's debates running, their rank in their workspace
    (oldest first), then age."""
    running = (
        sql_select(col(Debate.team_id), func.count().label("running"))
        .where(col(Debate.state) == DebateState.RUNNING, col(Debate.lease_expires_at) >= utcnow())
        .group_by(col(Debate.team_id))
        .subquery()
    )
    rank = (
        func.row_number()
        .over(partition_by=col(Debate.team_id), order_by=col(Debate.id))
        .label("rank")
    )
    waiting = (
        sql_select(col(Debate.id).label("id"), col(Debate.team_id).label("team_id"), rank)
        .where(claimable)
        .subquery()
    )
    busy = func.coalesce(running.c.running, 0)
    query = (
        sql_select(waiting.c.id)
        .select_from(waiting.outerjoin(running, running.c.team_id == waiting.c.team_id))
        .where(waiting.c.rank <= count)
        .order_by(busy + waiting.c.rank, waiting.c.rank, waiting.c.id)
        .limit(count)
    )
    return [int(found) for found in session.execute(query).scalars()]


def claim_debate(
    session: Session, *, worker_id: str, lease_s: float, debate_id: int | None = None
) -> Debate | None:
    """Take the oldest claimable debate (or only `debate_id`); None if there is none."""
    claimed = claim_debates(session, worker_id=worker_id, lease_s=lease_s, debate_id=debate_id)
    return claimed[0] if claimed else None


def renew_lease(session: Session, *, debate_id: int, worker_id: str, lease_s: float) -> None:
    """Extend our lease; raises LeaseLostError when another worker has taken the debate."""
    now = utcnow()
    renewed = session.execute(
        update(Debate)
        .where(
            col(Debate.id) == debate_id,
            col(Debate.lease_owner) == worker_id,
            col(Debate.state) == DebateState.RUNNING,
        )
        .values(lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
        .returning(col(Debate.id))
    ).scalar_one_or_none()
    session.commit()
    if renewed is None:
        raise LeaseLostError(f"worker {worker_id} no longer holds debate {debate_id}")


def release_lease(session: Session, *, debate_id: int, worker_id: str) -> None:
    """Give up our lease now (we are stopping): the debate is claimable again at once."""
    now = utcnow()
    session.execute(
        update(Debate)
        .where(
            col(Debate.id) == debate_id,
            col(Debate.lease_owner) == worker_id,
            col(Debate.state) == DebateState.RUNNING,
        )
        .values(lease_expires_at=now, updated_at=now)
    )
    session.commit()


def count_debates(session: Session, *, state: DebateState | None = None) -> int:
    query = select(func.count()).select_from(Debate)
    if state is not None:
        query = query.where(Debate.state == state)
    return int(session.exec(query).one())


def debate_ids(session: Session, *, finished: bool = False) -> list[int]:
    """Every debate's id (only finished ones' with `finished`), in order."""
    query = select(Debate.id).order_by(col(Debate.id))
    if finished:
        query = query.where(Debate.state == DebateState.FINISHED)
    return [int(debate_id) for debate_id in session.exec(query) if debate_id is not None]


def fork_debate(
    session: Session,
    *,
    new: NewDebate,
    original_id: int,
    limits: InFlightLimits | None = None,
    caps: SpendCaps | None = None,
) -> tuple[Debate, bool]:
    """Queue `new` as a follow-up that carries debate `original_id`'s turns and thread messages
    forward (another round), admitted like any debate (`limits`, `caps`: see `add_debate`); or
    return the one already made for its trigger key.

    The turns are copied (re-chained under the new debate), so the engine replays them instead of
    asking a model again; the delivered parent and round messages are shared, so nothing is
    re-posted and the status updates land on the same parent.
    """
    fork, created = add_debate(session, new=new, limits=limits, caps=caps)
    if not created:
        return fork, False
    assert fork.id is not None
    try:
        prev = GENESIS_HASH
        for row in turn_rows(session, debate_id=original_id):
            fields = row.model_dump(exclude={"id", "debate_id", "prev_hash", "hash"})
            copy = Turn(**fields, debate_id=fork.id, prev_hash=prev, hash="")
            copy.hash = turn_digest(copy, prev)
            prev = copy.hash
            session.add(copy)
        for owed in outbox.rows_of(session, debate_id=original_id):
            carried = (
                owed.key.startswith((outbox.PARENT, "round:")) and owed.action == OutboxAction.POST
            )
            if carried and owed.state == OutboxState.SENT:
                fields = owed.model_dump(exclude={"id", "debate_id"})
                session.add(Outbox(**fields, debate_id=fork.id))
        session.commit()
    except IntegrityError:
        session.rollback()
        made = debate_for_key(session, trigger_key=new.trigger_key)
        if made is None:
            raise  # refused for another reason than its key
        return made, False
    session.refresh(fork)
    return fork, True
