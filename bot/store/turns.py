"""A debate's turns: the hash chain they are appended to (in batches, by the lease holder only),
and how they are read back for the engine to replay.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from sqlalchemy import Select, func, insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.audit import (
    GENESIS_HASH,
    turn_digest,
)
from bot.store.debate_tables import Turn
from bot.store.errors import (
    LeaseLostError,
    StoreRefusedError,
)
from bot.store.sql import DEBATES, TURNS, among, member_of
from bot.store.workspaces import SUSPENDED
from engine.models import Role, TurnRecord, Usage

_LEASE_COLUMNS = (
    DEBATES.c.id,
    DEBATES.c.lease_owner,
    DEBATES.c.halt_reason,
    DEBATES.c.team_id,
    DEBATES.c.enterprise_id,
    DEBATES.c.suspended_at,
    DEBATES.c.cancel_requested_at,
)


@functools.cache
def _lease_check(dialect: str) -> Select[Any]:
    """The turn batch's lease check, built once per dialect; its ids are the `ids` parameter."""
    ids = member_of(dialect, DEBATES.c.id, key="ids")
    query: Select[Any] = DEBATES.select().with_only_columns(*_LEASE_COLUMNS).where(ids)
    return query.order_by(DEBATES.c.id).with_for_update()


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
    stop_asked: bool = field(default=False, compare=False)
    """Whether a person had asked to stop the debate when the write that made this head was
    made (bot.store.cancels): the worker starts no further model call."""


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
        TURNS.select()
        .where(among(session, TURNS.c.debate_id, debate_ids))
        .order_by(TURNS.c.debate_id, TURNS.c.seq)
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


def turn_row(write: TurnWrite) -> dict[str, Any]:
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
        row = turn_row(write)
        row["team_id"], row["enterprise_id"] = lease.team_id, lease.enterprise_id
        rows.append(row)
        halted = SUSPENDED if lease.suspended_at is not None else lease.halt_reason
        asked = lease.cancel_requested_at is not None
        results.append(
            ChainHead(seq=row["seq"], hash=row["hash"], halt_reason=halted, stop_asked=asked)
        )
    if not rows:
        session.rollback()
        return results
    try:
        session.connection().execute(insert(TURNS), rows)
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


def chain_tail(session: Session, *, debate_id: int) -> tuple[int, str]:
    """(turn count, last turn's hash) of the debate's chain."""
    count = int(session.exec(select(func.count()).where(Turn.debate_id == debate_id)).one())
    return count, chain_head(session, debate_id=debate_id).hash
