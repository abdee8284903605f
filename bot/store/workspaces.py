"""A workspace's life on the deployment: suspended when it uninstalls the app (or Slack revokes
its bot's token), resumed when it installs again, and its records deleted when an admin asks
(after they are archived: `debatebot workspace delete`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from bot.store.calibration_tables import CalibrationLabel, WeightsAdoption
from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import Debate, DebateState
from bot.store.dedupe_tables import ProcessedTrigger
from bot.store.errors import WorkspaceScopeError
from bot.store.outbox import DEFAULT_DEADLINE_S
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.sql import rows_changed
from bot.store.tenancy import Workspace, scope_of
from engine.models import utcnow

SUSPENDED = "suspended: the app was uninstalled from this workspace, or its bot token revoked"
"""The halt reason a suspended debate's turn write answers with (bot.store.turns): its worker
hands it back instead of ending it."""
OPEN_MESSAGES = (OutboxState.PENDING, OutboxState.SENDING)
DROPPED = "dropped: "
"""How a dropped message's `last_error` begins (then why)."""


@dataclass(frozen=True)
class Suspension:
    """What suspending a workspace stopped: its unfinished debates and its owed messages."""

    debates: int
    dropped: int


def _org_wide(session: Session, enterprise_id: str | None, *, doing: str) -> bool:
    """Whether what is `doing` must be narrowed to org `enterprise_id`: the session is not one
    workspace's. WorkspaceScopeError when it is for every workspace and names no org."""
    if isinstance(scope_of(session), Workspace):
        return False
    if enterprise_id is None:
        raise WorkspaceScopeError(f"{doing} every workspace at once is not a thing to do")
    return True


def suspend(session: Session, *, reason: str, enterprise_id: str | None = None) -> Suspension:
    """Stop the session's workspace (or, for every workspace, all of Enterprise Grid org
    `enterprise_id`'s: an org-wide install): its unfinished debates are suspended (no claim; a
    running one stops at its next turn and is handed back, its stored turns kept), and the
    messages it is owed are dropped, each kept as a failed outbox row that says why (those of a
    suspended debate are owed again if it resumes: `resume`). Committed. Suspending again
    changes nothing."""
    debates = update(Debate).where(
        col(Debate.state) != DebateState.FINISHED, col(Debate.suspended_at).is_(None)
    )
    owed = update(Outbox).where(col(Outbox.state).in_(OPEN_MESSAGES))
    if _org_wide(session, enterprise_id, doing="suspending"):
        debates = debates.where(col(Debate.enterprise_id) == enterprise_id)
        owed = owed.where(col(Outbox.enterprise_id) == enterprise_id)
    now = utcnow()
    stopped = session.execute(debates.values(suspended_at=now, updated_at=now))
    dropped = session.execute(
        owed.values(
            state=OutboxState.FAILED,
            claimed_by=None,
            claimed_until=None,
            last_error=f"{DROPPED}{reason}",
        )
    )
    session.commit()
    return Suspension(
        debates=rows_changed(stopped),
        dropped=rows_changed(dropped),
    )


def resume(session: Session, *, enterprise_id: str | None = None) -> int:
    """The app is installed again: the suspended debates of the session's workspace (or of org
    `enterprise_id`) may be claimed again and go on from their stored turns, and what they were
    owed when it was dropped is owed again (their thread's parent among it: without it the
    debate would have no thread). What finished debates and channels were owed stays dropped.
    Committed; how many debates."""
    suspended = select(Debate.id).where(col(Debate.suspended_at).is_not(None))
    resumed = update(Debate).where(col(Debate.suspended_at).is_not(None))
    if _org_wide(session, enterprise_id, doing="resuming"):
        suspended = suspended.where(col(Debate.enterprise_id) == enterprise_id)
        resumed = resumed.where(col(Debate.enterprise_id) == enterprise_id)
    now = utcnow()
    session.execute(
        update(Outbox)
        .where(
            col(Outbox.debate_id).in_(suspended.scalar_subquery()),
            col(Outbox.state) == OutboxState.FAILED,
            col(Outbox.last_error).startswith(DROPPED),
        )
        .values(
            state=OutboxState.PENDING,
            attempts=0,
            next_attempt_at=now,
            deadline_at=now + timedelta(seconds=DEFAULT_DEADLINE_S),
            last_error=None,
        )
    )
    result = session.execute(resumed.values(suspended_at=None, updated_at=now))
    session.commit()
    return rows_changed(result)


def debate_ids(session: Session) -> list[int]:
    """The session's workspace's debates, oldest first."""
    return [
        int(found)
        for found in session.exec(select(Debate.id).order_by(col(Debate.id))).all()
        if found is not None
    ]


def delete_remaining(session: Session) -> int:
    """Delete what the session's workspace keeps besides its debates (removed one by one, each
    after its archive verified): channel settings, calibration labels, weights adoptions, event
    ids, a channel's own messages. Committed; how many rows."""
    if not isinstance(scope_of(session), Workspace):
        raise WorkspaceScopeError("deleting records is done one workspace at a time")
    if session.exec(select(Debate.id).limit(1)).first() is not None:
        raise WorkspaceScopeError("the workspace still has debates: archive and remove them first")
    removed = 0
    for table in (ChannelSettings, CalibrationLabel, WeightsAdoption, ProcessedTrigger, Outbox):
        removed += rows_changed(session.execute(delete(table)))
    session.commit()
    return removed
