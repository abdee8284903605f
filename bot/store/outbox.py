"""The outbox: every message a debate (or a channel, with no debate) owes people, as rows
written with the state that creates them.

`stage` adds rows inside a caller's unit of work (enqueue, finish, review); the other functions
commit their own. Posts of one debate form a lane delivered in `(seq, part, id)` order; updates
are coalesced per message (a newer status replaces a pending one). A debate's streamed plan is
one row (`stream`) coalesced the same way. What the delivery loop (`bot.jobs.delivery`) does on
the rows is in bot.store.outbox_claims (claims and leases), bot.store.outbox_deliveries (what
became of a claimed message) and bot.store.outbox_stream (the stream row).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.debate_tables import Debate
from bot.store.outbox_tables import (
    Outbox,
    OutboxAction,
    OutboxFallback,
    OutboxState,
    OutboxTarget,
    StreamState,
)
from bot.store.sql import insert_once
from engine.models import utcnow

DEFAULT_DEADLINE_S = 24 * 3600.0
PARENT = "parent"
PARENT_UPDATE = "update:parent"
REVIEW = "review"
STREAM = "stream"
"""The key of a debate's streamed plan."""
SHOWN_IN_STREAM = "shown in the stream"
"""How a live status the stream already shows is marked delivered (no Slack call made)."""


@dataclass(frozen=True)
class Draft:
    """A message to owe: rendered by `bot.messages.owed`, written by the store, sent by the
    delivery loop."""

    key: str
    text: str
    blocks: list[dict[str, Any]]
    target: OutboxTarget = OutboxTarget.THREAD
    action: OutboxAction = OutboxAction.POST
    target_key: str | None = None
    recipients: tuple[str, ...] = ()
    fallback: OutboxFallback = OutboxFallback.NONE
    channel: str | None = None
    """Where a `channel` post goes when not in the debate's own channel (a review channel)."""


def _current_parent(keys: Iterable[str]) -> str:
    """The key of the debate's parent as it is now (`parent`, or `parent:N` once re-created)."""
    numbers = [int(key.split(":")[1]) for key in keys if key.startswith(f"{PARENT}:")]
    return f"{PARENT}:{max(numbers)}" if numbers else PARENT


def current_parent(session: Session, *, debate_id: int) -> str:
    """The key of the debate's parent as it is now (`parent`, or `parent:N` once re-created)."""
    keys = session.exec(
        select(Outbox.key).where(Outbox.debate_id == debate_id, col(Outbox.key).like(f"{PARENT}%"))
    ).all()
    return _current_parent(keys)


def _rows(session: Session, debate_id: int) -> dict[str, Outbox]:
    rows = session.exec(select(Outbox).where(Outbox.debate_id == debate_id))
    return {row.key: row for row in rows}


def stage(
    session: Session,
    *,
    debate: Debate,
    drafts: Iterable[Draft],
    deadline_s: float = DEFAULT_DEADLINE_S,
    owed: Mapping[str, Outbox] | None = None,
) -> list[Outbox]:
    """Add `drafts` to the debate's outbox in the caller's transaction (no commit).

    A post whose key is already owed is left as it is (replayed events owe nothing new); an
    update replaces the content of its pending row, or reopens a delivered one, so only the
    newest status goes out. `owed` is the debate's outbox by key when the caller has read it
    already (a batch of endings reads all of theirs in one query).
    """
    assert debate.id is not None
    existing = dict(owed) if owed is not None else _rows(session, debate.id)
    top = max((row.seq for row in existing.values()), default=0)
    now = utcnow()
    staged: list[Outbox] = []
    for draft in drafts:
        if draft.action == OutboxAction.UPDATE and draft.target_key == PARENT:
            draft = replace(draft, target_key=_current_parent(existing))
        row = existing.get(draft.key)
        if draft.action == OutboxAction.STREAM:
            if row is not None:
                _restream(row, draft, now, deadline_s)
                session.add(row)
                staged.append(row)
                continue
            if draft.text:
                # A final version (the stop's text) closes a stream already owed; it never
                # starts one (the debate streamed nothing: triage, or no turn started).
                continue
        if row is not None:
            if draft.action == OutboxAction.UPDATE:
                row.text, row.blocks = draft.text, draft.blocks
                row.target_key = draft.target_key or row.target_key
                row.version += 1
                row.state = OutboxState.PENDING
                row.attempts = 0
                row.next_attempt_at = now
                row.deadline_at = now + timedelta(seconds=deadline_s)
                row.last_error = None
                session.add(row)
                staged.append(row)
            continue
        top += 1
        row = Outbox(
            debate_id=debate.id,
            key=draft.key,
            seq=top,
            action=draft.action,
            target=draft.target,
            target_key=draft.target_key,
            recipients=list(draft.recipients),
            fallback=draft.fallback,
            channel_id=draft.channel or debate.channel_id or "",
            text=draft.text,
            blocks=draft.blocks,
            next_attempt_at=now,
            deadline_at=now + timedelta(seconds=deadline_s),
        )
        session.add(row)
        existing[draft.key] = row
        staged.append(row)
    return staged


def _restream(row: Outbox, draft: Draft, now: datetime, deadline_s: float) -> None:
    """A newer version of the plan: it replaces the row's content; a stream already closed
    or refused (or given up) keeps what it had. A version Slack has already taken is owed
    again now; one waiting (for a retry, for its parent) keeps its turn."""
    if row.stream_state in (StreamState.CLOSED, StreamState.REFUSED):
        return
    if row.state == OutboxState.FAILED:
        return
    row.text, row.blocks = draft.text, draft.blocks
    row.version += 1
    row.deadline_at = now + timedelta(seconds=deadline_s)
    if row.state == OutboxState.SENT:
        row.state = OutboxState.PENDING
        row.attempts = 0
        row.next_attempt_at = now
        row.last_error = None


def owe(
    session: Session,
    *,
    debate_id: int,
    drafts: Sequence[Draft],
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> list[Outbox]:
    """Owe `drafts` as one unit of work; a concurrent writer of the same key wins quietly."""
    debate = session.get(Debate, debate_id)
    if debate is None:
        return []
    try:
        staged = stage(session, debate=debate, drafts=drafts, deadline_s=deadline_s)
        session.commit()
    except IntegrityError:
        session.rollback()
        return []
    return staged


def rows_of(session: Session, *, debate_id: int) -> list[Outbox]:
    """The debate's outbox in delivery order (posts), updates last."""
    rows = session.exec(
        select(Outbox)
        .where(Outbox.debate_id == debate_id)
        .order_by(col(Outbox.action), col(Outbox.seq), col(Outbox.part), col(Outbox.id))
    )
    return list(rows)


def row_for(session: Session, *, debate_id: int, key: str) -> Outbox | None:
    return session.exec(
        select(Outbox).where(Outbox.debate_id == debate_id, Outbox.key == key)
    ).one_or_none()


def owe_channel(
    session: Session, *, channel_id: str, draft: Draft, deadline_s: float = DEFAULT_DEADLINE_S
) -> bool:
    """Owe `channel_id` a top-level post with no debate (the daily digest), once per key;
    False when it was owed before. Delivered like every other owed message."""
    now = utcnow()
    return insert_once(
        session,
        Outbox(
            debate_id=None,
            key=draft.key,
            channel_key=f"{channel_id}:{draft.key}",
            seq=0,
            action=OutboxAction.POST,
            target=OutboxTarget.CHANNEL,
            channel_id=channel_id,
            text=draft.text,
            blocks=draft.blocks,
            next_attempt_at=now,
            deadline_at=now + timedelta(seconds=deadline_s),
        ),
    )
