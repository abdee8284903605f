"""The outbox: every message a debate owes people, as rows written with the state that creates
them, and the bookkeeping the delivery loop (`bot.jobs.delivery`) does on them.

`stage` adds rows inside a caller's unit of work (enqueue, finish, review); the other functions
commit their own. Posts of one debate form a lane delivered in `(seq, part, id)` order; updates
are coalesced per message (a newer status replaces a pending one). A debate's streamed plan is
one row (`stream`) coalesced the same way; it records what Slack has of it (`streamed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, update
from sqlalchemy import select as sql_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store import refusals
from bot.store.debate_tables import Debate, DebateState
from bot.store.outbox_tables import (
    Outbox,
    OutboxAction,
    OutboxFallback,
    OutboxState,
    OutboxTarget,
    StreamState,
)
from bot.store.review_tables import Escalation
from bot.store.sql import insert_once, rows_changed
from engine.models import utcnow

DEFAULT_DEADLINE_S = 24 * 3600.0
PARENT = "parent"
PARENT_UPDATE = "update:parent"
REVIEW = "review"
STREAM = "stream"
"""The key of a debate's streamed plan."""
SHOWN_IN_STREAM = "shown in the stream"
"""How a live status the stream already shows is marked delivered (no Slack call made)."""
OPEN_STATES = (OutboxState.PENDING, OutboxState.SENDING)


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


def _due(now: datetime) -> Any:
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
            _due(utcnow()),
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
        .where(col(Outbox.id) == row.id, _due(now))
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
    return _claimed_with_debate(session, head, owner, claim_s)


def _claimed_with_debate(
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
            Outbox.debate_id == debate_id, Outbox.action == OutboxAction.UPDATE, _due(utcnow())
        )
    ).all()
    claimed: list[tuple[Outbox, Outbox | None]] = []
    for row in rows:
        mine = _claim(session, row, owner, claim_s)
        if mine is not None:
            target = row_for(session, debate_id=debate_id, key=mine.target_key or "")
            claimed.append((mine, target))
    return claimed


def _owned(session: Session, row_id: int, owner: str) -> Outbox | None:
    row = session.get(Outbox, row_id)
    if row is None or row.claimed_by != owner or row.state != OutboxState.SENDING:
        session.rollback()
        return None
    return row


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
    row = _owned(session, row_id, owner)
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
    row = _owned(session, row_id, owner)
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
    row = _owned(session, row_id, owner)
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
    row = _owned(session, row_id, owner)
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


def release(session: Session, *, row_id: int, owner: str) -> None:
    """Hand a claimed message back, due at once (the process is stopping)."""
    row = _owned(session, row_id, owner)
    if row is None:
        return
    row.state = OutboxState.PENDING
    row.claimed_by, row.claimed_until = None, None
    session.add(row)
    session.commit()


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


# --- a debate's streamed plan ------------------------------------------------------------------


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
    row = session.exec(
        select(Outbox).where(
            Outbox.debate_id == debate_id, Outbox.action == OutboxAction.STREAM, _due(utcnow())
        )
    ).one_or_none()
    claimed = _claimed_with_debate(session, row, owner, claim_s)
    if claimed is None:
        return None
    return ClaimedStream(*claimed, row_for(session, debate_id=debate_id, key=PARENT))


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
    row = _owned(session, row_id, owner)
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
    row = _owned(session, row_id, owner)
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
    row = _owned(session, row_id, owner)
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
