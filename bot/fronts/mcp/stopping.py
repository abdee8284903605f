"""`cancel_debate`: a coding agent stops a debate through the same request as every front
door's cancel (bot.store.cancels, CancelSource.MCP), recorded as the agent's identity; the
worker holding the debate ends it as cancelled, sealed like any other ending."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from bot.fronts.mcp.reading import no_such_debate
from bot.store import cancels
from bot.store.debate_tables import CancelSource
from bot.store.errors import CancelRefusedError, DebateNotFoundError
from bot.store.tenancy import Workspace


class CancelError(Exception):
    """A cancel the store refused: no such debate, or one that has already finished; the
    message says which and what the agent can do."""


async def cancel_debate(
    engine: Engine, *, workspace: Workspace, debate_id: int, by: str
) -> dict[str, Any]:
    """Ask to stop debate `debate_id` for `by` (idempotent: asking again changes nothing and
    says who asked first); CancelError for an unknown or finished debate."""
    try:
        asked = await cancels.ask_cancel(
            engine, workspace=workspace, debate_id=debate_id, by=by, source=CancelSource.MCP
        )
    except DebateNotFoundError:
        raise CancelError(no_such_debate(debate_id)) from None
    except CancelRefusedError as error:
        raise CancelError(f"{error}; call get_debate with id {debate_id} for its verdict") from None
    return {
        **asked.answer(),
        "next": (
            f"the debate stops before its next model call; call wait_for_debate with id"
            f" {debate_id} to see it end as cancelled"
            if asked.new
            else f"a cancel was already asked ({cancels.cancel_reason(asked.debate)}); it stands"
        ),
    }
