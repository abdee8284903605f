"""Keyword-only repository functions: the only code that reads or writes the audit store.

Each function takes an open `Session` and commits its own unit of work, so a caller never holds
a write transaction (and, on SQLite, the write lock) across a model call.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, Select, any_, bindparam, func, insert, or_, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from bot.store import operations, outbox
from bot.store.audit import (
    GENESIS_HASH,
    PRE_SEAL_VERSION,
    ChainReport,
    audit,
    seal,
    signature_of,
    turn_digest,
)
from bot.store.errors import (
    BudgetExceededError,
    DebateNotFoundError,
    InFlightLimitError,
    LeaseLostError,
    StoreRefusedError,
)
from bot.store.results import StoredResult
from bot.store.tables import (
    ChannelSettings,
    Debate,
    DebateSource,
    DebateState,
    Escalation,
    EscalationState,
    Outbox,
    Review,
    TriageState,
    Turn,
    VerdictRecord,
)
from engine.models import DebateResult, DebateSpec, Role, TurnRecord, Usage, utcnow

T = TypeVar("T")
M = TypeVar("M", bound=SQLModel)
OpeningMessages = Callable[[Debate], list[outbox.Draft]]
"""The messages a newly queued debate owes (its parent, long material), given its row."""
ClosingMessages = Callable[[Debate, DebateResult, Escalation | None], list[outbox.Draft]]
"""The messages a finished debate owes (verdict, parent summary, review request)."""

# The hot path's statements, built once: constructing one costs more than running it on SQLite.
_DEBATES = Debate.__table__  # type: ignore[attr-defined]
_TURNS = Turn.__table__  # type: ignore[attr-defined]
_VERDICTS = VerdictRecord.__table__  # type: ignore[attr-defined]
_ESCALATIONS = Escalation.__table__  # type: ignore[attr-defined]
_CHANNELS = ChannelSettings.__table__  # type: ignore[attr-defined]
_FINISH_DEBATE = update(_DEBATES).where(_DEBATES.c.id == bindparam("finished_id"))
_LEASE_COLUMNS = (_DEBATES.c.id, _DEBATES.c.lease_owner, _DEBATES.c.halt_reason)


def _member_of(
    dialect: str, column: Any, *, key: str | None = None, values: Sequence[Any] | None = None
) -> ColumnElement[bool]:
    """`column IN (...)` over one parameter (`key` when the statement is built once, `values`
    for a batch's own). On PostgreSQL it is `column = ANY(array)`, one SQL text whatever the
    batch's size: an IN list of each new length was a new statement for psycopg to convert and
    for the server to plan, 1-1.7 ms of CPU per batch where the array form takes 0.6 (and
    psycopg prepares it once it repeats)."""
    listed = None if values is None else list(values)
    if dialect == "postgresql":
        # Imported here: a SQLite deployment never loads the PostgreSQL dialect (30 ms).
        from sqlalchemy.dialects.postgresql import ARRAY

        array = bindparam(key, listed, type_=ARRAY(column.type))
        return cast(ColumnElement[bool], column == any_(array))
    return cast(ColumnElement[bool], column.in_(bindparam(key, listed, expanding=True)))


def _among(session: Session, column: Any, values: Sequence[Any]) -> ColumnElement[bool]:
    """`column IN values` for a batch, in the session's dialect (see `_member_of`)."""
    return _member_of(session.get_bind().dialect.name, column, values=values)


@functools.cache
def _lease_check(dialect: str) -> Select[Any]:
    """The turn batch's lease check, built once per dialect; its ids are the `ids` parameter."""
    ids = _member_of(dialect, _DEBATES.c.id, key="ids")
    query: Select[Any] = _DEBATES.select().with_only_columns(*_LEASE_COLUMNS).where(ids)
    return query.order_by(_DEBATES.c.id).with_for_update()


_SEALED_AT_ENQUEUE = (
    "trigger_key",
    "source",
    "channel_id",
    "requested_by",
    "parent_debate_id",
    "review_channel_id",
    "reviewers_channel_id",
    "link",
    "question",
    "protocol",
    "spec_json",
    "created_at",
    "triage",
    "triage_reason",
)
"""The debate's columns an ending reads besides its lease: what its seal covers from the debate
as queued (`bot.store.audit.debate_digest`), and the triage it keeps unless the run decided it."""


@functools.cache
def _closing_read(escalating: bool) -> Select[Any]:
    """The columns of a batch of debates that their endings need; when one escalates, joined to
    the escalation a debate may already have and to the channel whose reviewers decide it (the
    server's choice at enqueue, `reviewers_channel_id`; not where the request is posted). One
    statement, compiled once per process: three made a cold `debatebot run` compile three."""
    c = _DEBATES.c
    query: Select[Any] = _DEBATES.select().with_only_columns(
        c.id,
        c.lease_owner,
        c.state,
        c.pr_comment_due,
        *(getattr(c, name) for name in _SEALED_AT_ENQUEUE),
    )
    if not escalating:
        return query
    escalations, channels = _ESCALATIONS.c, _CHANNELS.c
    joined = _DEBATES.outerjoin(_ESCALATIONS, escalations.debate_id == c.id).outerjoin(
        _CHANNELS, channels.channel_id == c.reviewers_channel_id
    )
    return query.add_columns(
        escalations.id.label("escalation_id"), channels.reviewers.label("reviewers")
    ).select_from(joined)


def insert_once(session: Session, row: T, existing: Callable[[], T]) -> tuple[T, bool]:
    """Insert `row`, or, when a unique key refuses it, return `existing()`; (row, created).

    The database's unique constraint decides, not a prior lookup, so concurrent callers with one
    key get one row.
    """
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return existing(), False
    session.refresh(row)
    return row, True


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
    keys = sorted([f"channel:{channel_id}", *([f"user:{requested_by}"] if requested_by else [])])
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
    channel = session.get(ChannelSettings, channel_id) if channel_id else None
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


def enqueue_debate(
    session: Session,
    *,
    trigger_key: str,
    spec: DebateSpec,
    source: DebateSource,
    channel_id: str | None = None,
    thread_ts: str | None = None,
    requested_by: str | None = None,
    messages: OpeningMessages | None = None,
    limits: InFlightLimits | None = None,
    caps: SpendCaps | None = None,
    triage: bool = False,
    parent_debate_id: int | None = None,
    review_channel_id: str | None = None,
    reviewers_channel_id: str | None = None,
    link: str | None = None,
) -> tuple[Debate, bool]:
    """Insert a queued debate, or return the one already made for `trigger_key`; with `triage`
    its worker first asks whether a debate is warranted at all.

    Returns (debate, created). The unique key, not a prior lookup, decides: two concurrent
    requests with one key yield one debate. The `messages` it owes are written in the same
    transaction, so a queued debate never lacks its parent message. With `limits`, a new
    debate past the person's or channel's debates in flight raises InFlightLimitError; with
    `caps`, one whose cost ceiling could pass a monthly cap raises BudgetExceededError.
    `reviewers_channel_id` is the channel whose reviewers decide its review (the server's
    choice; see `Debate.reviewers_channel_id`).
    """
    existing = session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one_or_none()
    if existing is not None:
        return existing, False
    if limits is not None:
        _within_limits(session, limits=limits, requested_by=requested_by, channel_id=channel_id)
    if caps is not None:
        _within_budget(session, caps=caps, channel_id=channel_id, ceiling=spec.budget_usd or 0.0)
    debate = Debate(
        trigger_key=trigger_key,
        source=source,
        channel_id=channel_id,
        thread_ts=thread_ts,
        requested_by=requested_by,
        parent_debate_id=parent_debate_id,
        review_channel_id=review_channel_id,
        reviewers_channel_id=reviewers_channel_id,
        link=link,
        question=spec.question,
        protocol=spec.protocol,
        spec_json=spec.model_dump_json(),
        triage=TriageState.PENDING if triage else None,
    )
    session.add(debate)
    try:
        session.flush()
        if messages is not None:
            outbox.stage(session, debate=debate, drafts=messages(debate))
        session.commit()
    except IntegrityError:
        session.rollback()
        return session.exec(select(Debate).where(Debate.trigger_key == trigger_key)).one(), False
    session.refresh(debate)
    return debate, True


def get_debate(session: Session, *, debate_id: int) -> Debate:
    debate = session.get(Debate, debate_id)
    if debate is None:
        raise DebateNotFoundError(f"no debate with id {debate_id}")
    return debate


def claim_debates(
    session: Session,
    *,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
    debate_id: int | None = None,
) -> list[Debate]:
    """Take up to `limit` of the oldest queued debates, or ones whose worker's lease expired,
    in one statement; with `debate_id`, that debate only (the CLI runs the debate it queued).

    On PostgreSQL the candidate rows are locked `FOR UPDATE SKIP LOCKED`, so concurrent workers
    never wait on or take the same debate; SQLite has one writer at a time anyway.
    """
    now = utcnow()
    candidates = select(Debate.id).where(
        or_(
            col(Debate.state) == DebateState.QUEUED,
            (col(Debate.state) == DebateState.RUNNING) & (col(Debate.lease_expires_at) < now),
        )
    )
    if debate_id is not None:
        candidates = candidates.where(col(Debate.id) == debate_id)
    locked = candidates.order_by(col(Debate.id)).limit(limit).with_for_update(skip_locked=True)
    claimed = session.scalars(
        update(Debate)
        .where(col(Debate.id).in_(locked.scalar_subquery()))
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
    return sorted(claimed, key=lambda debate: debate.id or 0)


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


def turn_record(row: Any) -> TurnRecord:
    """The engine's record of a stored turn (a `Turn` or a row of its columns)."""
    return TurnRecord(
        round=row.round,
        role=Role(row.role),
        speaker=row.speaker,
        phase=row.phase,
        attempt=row.attempt,
        provider=row.provider,
        model=row.model,
        prompt_sha256=row.prompt_sha256,
        request_sha256=row.request_sha256,
        usage=Usage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cached_input_tokens=row.cached_input_tokens,
            cache_write_input_tokens=row.cache_write_input_tokens,
            reasoning_tokens=row.reasoning_tokens,
        ),
        cost_usd=row.cost_usd,
        latency_s=row.latency_s,
        reasks=row.reasks,
        raw_text=row.raw_text,
        parsed=json.loads(row.parsed_json),
        created_at=row.created_at,
    )


def turn_rows(session: Session, *, debate_id: int) -> list[Turn]:
    return list(
        session.exec(select(Turn).where(Turn.debate_id == debate_id).order_by(col(Turn.seq)))
    )


def stored_turns(session: Session, *, debate_id: int) -> list[TurnRecord]:
    """The debate's turns in order, as the engine replays them on resume."""
    turns, _ = stored_runs(session, debate_ids=[debate_id])[debate_id]
    return turns


@dataclass(frozen=True)
class ChainHead:
    """The last stored turn of a debate: its seq and hash, which the next turn links to.

    The run holding a debate's lease keeps it in memory (only the lease holder writes), so
    storing a turn needs no read of the previous one.
    """

    seq: int = -1
    hash: str = GENESIS_HASH
    halt_reason: str | None = field(default=None, compare=False)
    """The debate's halt reason as the write that made this head found it: the worker checks it
    before the next model call without a read of its own."""


def stored_runs(
    session: Session, *, debate_ids: Sequence[int]
) -> dict[int, tuple[list[TurnRecord], ChainHead]]:
    """Each debate's stored turns (as the engine replays them) and chain head, in one query:
    what a worker reads for a batch of debates it has just claimed."""
    runs: dict[int, tuple[list[TurnRecord], ChainHead]] = {
        debate_id: ([], ChainHead()) for debate_id in debate_ids
    }
    # Core rows, not Turn objects: the ORM's entity load cost more to compile and to run.
    rows = session.connection().execute(
        _TURNS.select()
        .where(_among(session, _TURNS.c.debate_id, debate_ids))
        .order_by(_TURNS.c.debate_id, _TURNS.c.seq)
    )
    for row in rows:
        turns, _ = runs[row.debate_id]
        turns.append(turn_record(row))
        runs[row.debate_id] = (turns, ChainHead(seq=row.seq, hash=row.hash))
    return runs


@dataclass(frozen=True)
class TurnWrite:
    """One finished turn to store after `head`, by the worker that holds the debate's lease."""

    debate_id: int
    worker_id: str
    turn: TurnRecord
    head: ChainHead


def chain_head(session: Session, *, debate_id: int) -> ChainHead:
    """The debate's last stored turn (`ChainHead()` when it has none)."""
    last = session.exec(
        select(Turn.seq, Turn.hash)
        .where(Turn.debate_id == debate_id)
        .order_by(col(Turn.seq).desc())
        .limit(1)
    ).one_or_none()
    return ChainHead() if last is None else ChainHead(seq=last[0], hash=last[1])


def _turn_row(write: TurnWrite) -> dict[str, Any]:
    """The row of `write`'s turn, hashed onto its head, as column values (a plain dict:
    building a table model per turn cost more than inserting it)."""
    turn = write.turn
    row: dict[str, Any] = {
        "debate_id": write.debate_id,
        "seq": write.head.seq + 1,
        "round": turn.round,
        "role": turn.role.value,
        "speaker": turn.speaker,
        "phase": turn.phase,
        "attempt": turn.attempt,
        "provider": turn.provider,
        "model": turn.model,
        "prompt_sha256": turn.prompt_sha256,
        "request_sha256": turn.request_sha256,
        "input_tokens": turn.usage.input_tokens,
        "output_tokens": turn.usage.output_tokens,
        "cached_input_tokens": turn.usage.cached_input_tokens,
        "cache_write_input_tokens": turn.usage.cache_write_input_tokens,
        "reasoning_tokens": turn.usage.reasoning_tokens,
        "cost_usd": turn.cost_usd,
        "latency_s": turn.latency_s,
        "reasks": turn.reasks,
        "raw_text": turn.raw_text,
        "parsed_json": json.dumps(turn.parsed, sort_keys=True),
        "created_at": turn.created_at.astimezone(UTC),
        "prev_hash": write.head.hash,
    }
    row["hash"] = turn_digest(row, write.head.hash)
    return row


def append_turns(
    session: Session, *, writes: Sequence[TurnWrite]
) -> list[ChainHead | LeaseLostError | StoreRefusedError]:
    """Store finished turns of one or many debates in one transaction (a group commit), each
    chained to its debate's head; returns, per write, its new head or why it was refused.

    Only a debate's lease holder may write: the leases of every debate in the batch are read
    (and on PostgreSQL locked) in one statement, so a worker that lost its lease cannot append
    after the new holder. The unique keys refuse a turn stored twice or a stale head; when one
    write of a batch is refused, each is retried alone so only that one fails.
    """
    ids = sorted({write.debate_id for write in writes})
    lease_check = _lease_check(session.get_bind().dialect.name)
    leases = {row.id: row for row in session.connection().execute(lease_check, {"ids": ids})}
    results: list[ChainHead | LeaseLostError | StoreRefusedError] = []
    rows: list[dict[str, Any]] = []
    for write in writes:
        lease = leases.get(write.debate_id)
        if lease is None or lease.lease_owner != write.worker_id:
            results.append(
                LeaseLostError(f"worker {write.worker_id} no longer holds debate {write.debate_id}")
            )
            continue
        row = _turn_row(write)
        rows.append(row)
        results.append(ChainHead(seq=row["seq"], hash=row["hash"], halt_reason=lease.halt_reason))
    if not rows:
        session.rollback()
        return results
    try:
        session.connection().execute(insert(_TURNS), rows)
        session.commit()
    except IntegrityError as error:
        session.rollback()
        if len(writes) > 1:
            return [
                outcome for write in writes for outcome in append_turns(session, writes=[write])
            ]
        write = writes[0]
        return [
            StoreRefusedError(
                f"debate {write.debate_id} already has a turn {write.turn.key} (or turn"
                f" {write.head.seq + 1}); the turn was not stored twice. A protocol that asks"
                f" one key twice is a bug to report ({error.orig})"
            )
        ]
    return results


def _chain_tail(session: Session, *, debate_id: int) -> tuple[int, str]:
    """(turn count, last turn's hash) of the debate's chain."""
    count = int(session.exec(select(func.count()).where(Turn.debate_id == debate_id)).one())
    return count, chain_head(session, debate_id=debate_id).hash


@dataclass(frozen=True)
class Finish:
    """A finished run to record: its result, the messages its ending owes, the key that signs
    its seal, and its chain head when the run knows it (else it is read)."""

    debate_id: int
    worker_id: str
    result: DebateResult
    messages: ClosingMessages | None = None
    audit_key: bytes | None = None
    head: ChainHead | None = None


@dataclass(frozen=True)
class Sealed:
    """What recording an ending stored: the verdict's seal over the debate's turn chain."""

    debate_id: int
    turns: int
    tail: str
    head: str


Ended = Sealed | LeaseLostError | StoreRefusedError
"""Per ending: its seal, or why it was not recorded."""


def finish_debates(session: Session, *, finishes: Sequence[Finish]) -> list[Ended]:
    """Record the verdicts and close the debates, in one transaction (a group commit); only
    each debate's lease holder may finish it.

    For each, the verdict, the escalation when the verdict asks for one (with the channel's
    reviewers at this moment) and every message the ending owes are written together, so an
    escalating verdict can never exist without its escalation row and its review request. The
    verdict seals the turn chain (signed with the finish's `audit_key` when there is one).

    The rows are written with a few statements for the whole batch (Core, not one ORM object
    per row: at 200 endings landing together, the unit of work cost more than the database).
    When the database refuses the batch (a verdict already stored), it is rolled back and each
    ending is written again in a savepoint of its own, so only the refused one fails. An ending
    whose run lost its lease is returned as LeaseLostError and writes nothing.
    """
    known = _Closing.load(
        session,
        [finish.debate_id for finish in finishes],
        escalating=any(finish.result.verdict.escalate for finish in finishes),
        outboxes=any(finish.messages is not None for finish in finishes),
    )
    try:
        outcomes = _record_endings(session, finishes, known)
        session.commit()
        return outcomes
    except IntegrityError:
        session.rollback()
    outcomes = []
    for finish in finishes:
        try:
            with session.begin_nested():
                outcomes += _record_endings(session, [finish], known, reread_outbox=True)
        except IntegrityError as error:
            outcomes.append(
                StoreRefusedError(
                    f"debate {finish.debate_id} already has a verdict; it was not stored twice"
                    f" ({error.orig})"
                )
            )
    session.commit()
    return outcomes


@dataclass(frozen=True)
class _Closing:
    """What a batch of endings reads, in one or two queries rather than a few per ending: each
    debate's lease and the columns an ending keeps, with (when one of them escalates) the id of
    an escalation it already has and its reviewers' channel's reviewers; and, when messages are
    owed, the outbox rows."""

    debates: dict[int, Any]
    outboxes: dict[int, dict[str, Outbox]]

    @staticmethod
    def load(
        session: Session, debate_ids: list[int], *, escalating: bool, outboxes: bool
    ) -> _Closing:
        """Read what the endings need; the escalations and reviewers only when one of them
        escalates, the outbox rows only when one owes messages."""
        query = _closing_read(escalating).where(_among(session, _DEBATES.c.id, debate_ids))
        by_id = {row.id: row for row in session.connection().execute(query)}
        owed: dict[int, dict[str, Outbox]] = {}
        if outboxes:
            where_owed = _among(session, col(Outbox.debate_id), debate_ids)
            for row in session.exec(select(Outbox).where(where_owed)):
                assert row.debate_id is not None  # selected by debate
                owed.setdefault(row.debate_id, {})[row.key] = row
        return _Closing(debates=by_id, outboxes=owed)


@dataclass
class _Ending:
    finish: Finish
    sealed: Sealed
    verdict: dict[str, Any]
    debate: dict[str, Any]
    escalation: dict[str, Any] | None


def _record_endings(
    session: Session, finishes: Sequence[Finish], known: _Closing, *, reread_outbox: bool = False
) -> list[Ended]:
    """Write the endings of `finishes` in the caller's transaction (no commit): the verdicts,
    the debates' final state, new escalations, then the messages owed (they name the
    escalation's id). `reread_outbox` reads each debate's outbox afresh (after a rollback)."""
    outcomes: list[Ended] = []
    endings: list[_Ending] = []
    for finish in finishes:
        row = known.debates.get(finish.debate_id)
        if row is None or row.lease_owner != finish.worker_id or row.state != DebateState.RUNNING:
            lost = f"worker {finish.worker_id} no longer holds debate {finish.debate_id}"
            outcomes.append(LeaseLostError(lost))
            continue
        ending = _ending(session, finish, row, known)
        endings.append(ending)
        outcomes.append(ending.sealed)
    if not endings:
        return outcomes
    connection = session.connection()
    connection.execute(insert(_VERDICTS), [ending.verdict for ending in endings])
    connection.execute(_FINISH_DEBATE, [ending.debate for ending in endings])
    raised = [ending.escalation for ending in endings if ending.escalation is not None]
    if raised:
        connection.execute(insert(_ESCALATIONS), raised)
    owing = [ending for ending in endings if ending.finish.messages is not None]
    if owing:
        _stage_closings(session, owing, known, reread_outbox)
    return outcomes


def _ending(session: Session, finish: Finish, row: Any, known: _Closing) -> _Ending:
    """The rows that record `finish`: the sealed verdict, the debate's final columns, and a new
    escalation when the verdict asks for one and the debate has none yet."""
    debate_id, result = finish.debate_id, finish.result
    verdict = result.verdict
    now = utcnow()
    values: dict[str, Any] = {
        "debate_id": debate_id,
        "status": verdict.status.value,
        "decision": verdict.decision.value,
        "confidence": verdict.confidence,
        "level": verdict.level.value,
        "escalate": verdict.escalate,
        "synthesis": verdict.synthesis,
        "result_json": StoredResult.document(result),
        "created_at": now,
    }
    if finish.head is not None:
        turns, tail = finish.head.seq + 1, finish.head.hash
    else:
        turns, tail = _chain_tail(session, debate_id=debate_id)
    triage, triage_reason = row.triage, row.triage_reason
    triaged = (result.report or {}).get("triage")
    if isinstance(triaged, dict):
        triage = TriageState.DEBATE if triaged.get("debated") else TriageState.ANSWERED
        triage_reason = str(triaged.get("reason") or "")
    debate: dict[str, Any] = {
        "finished_id": debate_id,
        "state": DebateState.FINISHED.value,
        "outcome": verdict.status.value,
        "decision": verdict.decision.value,
        "confidence": verdict.confidence,
        "cost_usd": result.cost_usd,
        "error": result.error,
        "triage": triage,
        "triage_reason": triage_reason,
        "lease_owner": None,
        "lease_expires_at": None,
        "finished_at": now,
        "updated_at": now,
        "pr_comment_due": now if row.link else row.pr_comment_due,
    }
    finished = {name: getattr(row, name) for name in _SEALED_AT_ENQUEUE}
    seal(values, turns, tail, finish.audit_key, debate={**finished, **debate, "id": debate_id})
    debate["chain_head"], debate["chain_turns"] = values["chain_head"], turns
    escalation = None
    if verdict.escalate and row.escalation_id is None:
        escalation = {
            "debate_id": debate_id,
            "reasons": verdict.escalation_reasons or ["the verdict asks for a human decision"],
            "reviewers": list(row.reviewers or []),
            "message_ts": None,
            "state": EscalationState.OPEN.value,
            "created_at": now,
        }
    sealed = Sealed(debate_id=debate_id, turns=turns, tail=tail, head=values["chain_head"])
    return _Ending(finish, sealed, values, debate, escalation)


def _stage_closings(
    session: Session, owing: list[_Ending], known: _Closing, reread_outbox: bool
) -> None:
    """Stage the messages the endings owe; the debate and escalation rows they are rendered
    from are read back as they now stand (one query each for the batch)."""
    ids = [ending.finish.debate_id for ending in owing]
    debates = _as_stored(session, Debate, col(Debate.id), ids)
    escalations = _as_stored(session, Escalation, col(Escalation.debate_id), ids)
    for ending in owing:
        finish = ending.finish
        assert finish.messages is not None
        debate = debates[finish.debate_id]
        escalation = escalations.get(finish.debate_id) if finish.result.verdict.escalate else None
        drafts = finish.messages(debate, finish.result, escalation)
        owed = None if reread_outbox else known.outboxes.get(finish.debate_id, {})
        outbox.stage(session, debate=debate, drafts=drafts, owed=owed)


def _as_stored(session: Session, table: type[M], key: Any, ids: list[int]) -> dict[int, M]:
    """The rows of `table` whose `key` column is among `ids`, keyed by it, as the database now
    holds them (objects the session already has are refreshed)."""
    rows = session.exec(
        select(table).where(_among(session, key, ids)).execution_options(populate_existing=True)
    )
    return {getattr(row, key.key): row for row in rows}


def verdict_for(session: Session, *, debate_id: int) -> VerdictRecord | None:
    return session.exec(
        select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
    ).one_or_none()


def reviews_for(session: Session, *, debate_id: int) -> list[Review]:
    return list(
        session.exec(
            select(Review).where(Review.debate_id == debate_id).order_by(col(Review.created_at))
        )
    )


def escalation_for(session: Session, *, debate_id: int) -> Escalation | None:
    return session.exec(select(Escalation).where(Escalation.debate_id == debate_id)).one_or_none()


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


def verify_chain(session: Session, *, debate_id: int, key: bytes | None = None) -> ChainReport:
    """Verify the debate's turn chain and, once finished, its verdict, seal and signature (with
    `key`); the report names the first problem (see `bot.store.audit.audit`)."""
    return audit(
        get_debate(session, debate_id=debate_id),
        turn_rows(session, debate_id=debate_id),
        verdict_for(session, debate_id=debate_id),
        key=key,
    )


def sign_seal(session: Session, *, debate_id: int, key: bytes) -> tuple[str | None, ChainReport]:
    """Sign the debate's seal with `key` when everything else about it verifies and only the
    signature is missing (it was sealed before the key was set), or seal and sign a debate that
    finished before seals existed (version 0), as it stands. Returns what was done (`signed`,
    `sealed`, or None: nothing to do, or the record does not verify) and the report on the
    record as it now is."""
    report = verify_chain(session, debate_id=debate_id, key=key)
    verdict = verdict_for(session, debate_id=debate_id)
    if verdict is None or report.kind not in ("unsigned_seal", "unsealed_legacy"):
        return None, report
    if report.kind == "unsigned_seal":
        verdict.chain_signature = signature_of(
            key,
            version=verdict.chain_version,
            debate_id=debate_id,
            turns=verdict.chain_turns or 0,
            tail=verdict.chain_tail or "",
            head=verdict.chain_head or "",
        )
        done = "signed"
    else:
        debate = get_debate(session, debate_id=debate_id)
        rows = turn_rows(session, debate_id=debate_id)
        values = verdict.model_dump()
        tail = rows[-1].hash if rows else GENESIS_HASH
        seal(values, len(rows), tail, key, debate=debate, version=PRE_SEAL_VERSION)
        for name in ("chain_debate", "chain_turns", "chain_tail", "chain_head", "chain_signature"):
            setattr(verdict, name, values[name])
        debate.chain_head, debate.chain_turns = verdict.chain_head, verdict.chain_turns
        session.add(debate)
        done = "sealed"
    session.add(verdict)
    session.commit()
    return done, verify_chain(session, debate_id=debate_id, key=key)
