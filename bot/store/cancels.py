"""Cancel requests (issue 44): a person asks to stop a debate; the request is a flag on the
debate's row (who, when, from where) that whatever worker holds the debate polls for, and that
the next claim of a queued debate (or of one no worker holds) finds before any model call.

Only a worker ends a debate, so a cancelled debate's ending is recorded like any other: sealed,
with its receipt and the messages it owes, in one transaction (bot.store.endings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from bot.store.db import in_session
from bot.store.debate_tables import CancelSource, Debate, DebateState
from bot.store.errors import CancelRefusedError, DebateNotFoundError
from bot.store.sql import among, as_stored
from bot.store.tenancy import Workspace
from engine.models import utcnow


@dataclass(frozen=True)
class CancelAsked:
    """What a cancel request did: the debate as now stored, and whether this request made the
    cancel (False: somebody had already asked, and their request stands)."""

    debate: Debate
    new: bool

    def answer(self) -> dict[str, Any]:
        """What a front door (the web page, MCP) answers the one who asked: the debate's state
        and who stopped it, from where."""
        debate = self.debate
        return {
            "id": debate.id,
            "state": debate.state.value,
            "new_request": self.new,
            "cancelled_by": debate.cancelled_by,
            "cancelled_from": debate.cancelled_from.value if debate.cancelled_from else None,
        }


async def ask_cancel(
    engine: Engine, *, workspace: Workspace, debate_id: int, by: str, source: CancelSource
) -> CancelAsked:
    """`request_cancel` in a store session of its own, off the event loop: how a door that
    holds no session asks (the web page, MCP, the terminal's Ctrl-C)."""
    return await in_session(
        engine,
        lambda s: request_cancel(s, debate_id=debate_id, by=by, source=source),
        workspace=workspace,
    )


def request_cancel(
    session: Session, *, debate_id: int, by: str, source: CancelSource
) -> CancelAsked:
    """Ask to stop debate `debate_id` on behalf of `by` (a Slack user id, an operator's name),
    committed. Idempotent: a second request changes nothing and says so. Raises
    DebateNotFoundError for an unknown id (in the session's workspace), and CancelRefusedError
    for a debate that has already ended."""
    now = utcnow()
    asked = session.execute(
        update(Debate)
        .where(
            col(Debate.id) == debate_id,
            col(Debate.state) != DebateState.FINISHED,
            col(Debate.cancel_requested_at).is_(None),
        )
        .values(
            cancel_requested_at=now, cancelled_by=by[:80], cancelled_from=source, updated_at=now
        )
        .returning(col(Debate.id))
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    session.commit()
    debate = as_stored(session, Debate, col(Debate.id) == debate_id).one_or_none()
    if debate is None:
        raise DebateNotFoundError(f"no debate with id {debate_id}")
    if asked is None and debate.state == DebateState.FINISHED:
        ended = (debate.outcome.value if debate.outcome else "finished").lower()
        raise CancelRefusedError(
            f"debate {debate_id} has already finished ({ended}); there is nothing to stop"
        )
    return CancelAsked(debate=debate, new=asked is not None)


def cancels_among(session: Session, *, debate_ids: Sequence[int]) -> set[int]:
    """Which of `debate_ids` somebody asked to stop: one indexed read for a worker's whole set of
    running debates, whatever their number."""
    if not debate_ids:
        return set()
    query = select(Debate.id).where(
        among(session, col(Debate.id), list(debate_ids)),
        col(Debate.cancel_requested_at).is_not(None),
    )
    return {int(found) for found in session.exec(query) if found is not None}


def cancel_reason(debate: Debate) -> str:
    """How the ending of a cancelled debate says who stopped it, from where and when."""
    where = {
        CancelSource.SLACK_STOP: "with Slack's Stop button",
        CancelSource.COMMAND: "with /debate cancel",
        CancelSource.CLI: "with debatebot debates cancel",
        CancelSource.TERMINAL: "with Ctrl-C in the terminal",
        CancelSource.WEB: "from the web page",
        CancelSource.MCP: "over MCP (a coding agent's cancel_debate)",
    }
    source = debate.cancelled_from
    who = debate.cancelled_by or "someone"
    if source in (CancelSource.SLACK_STOP, CancelSource.COMMAND):
        who = f"<@{who}>"  # a Slack user id: Slack shows the person's name
    how = f" {where[source]}" if source is not None else ""
    when = debate.cancel_requested_at
    at = f" at {when:%Y-%m-%d %H:%M:%S} UTC" if when is not None else ""
    return f"stopped by {who}{how}{at}"


def debate_in_thread(session: Session, *, channel_id: str, thread_ts: str) -> Debate | None:
    """The debate a Slack thread's agent session stands for: the newest one of the thread that
    has not ended (a thread holds one debate at a time), else its newest (so a Stop pressed
    after the end is told it has finished); None for a thread with no debate."""
    query = (
        select(Debate)
        .where(Debate.channel_id == channel_id, Debate.thread_ts == thread_ts)
        .order_by(col(Debate.state) == DebateState.FINISHED, col(Debate.id).desc())
        .limit(1)
    )
    return session.exec(query).first()
