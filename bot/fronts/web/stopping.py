"""Stopping a debate from the web page or the HTTP API (issue 44), through the same request as
every front door's cancel (bot.store.cancels, CancelSource.WEB). The page has no identities of
its own: whoever holds the server's token stops it, recorded as `web`."""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy import Engine

from bot.fronts.web.guard import WebError
from bot.store import cancels
from bot.store.debate_tables import CancelSource
from bot.store.errors import CancelRefusedError, DebateNotFoundError
from bot.store.tenancy import Workspace

STOPPER = "web"
"""Who a cancel made through the web door is recorded as."""


class CancelOut(BaseModel):
    id: int
    state: str
    new_request: bool
    """False: somebody had already asked, and their request stands."""
    cancelled_by: str | None
    cancelled_from: str | None


async def cancel_debate(engine: Engine, *, workspace: Workspace, debate_id: int) -> CancelOut:
    """Ask to stop debate `debate_id`; 404 for an unknown one, 409 for a finished one (the
    message says it has finished)."""
    try:
        asked = await cancels.ask_cancel(
            engine, workspace=workspace, debate_id=debate_id, by=STOPPER, source=CancelSource.WEB
        )
    except DebateNotFoundError as error:
        raise WebError(404, f"there is no debate {debate_id}") from error
    except CancelRefusedError as error:
        raise WebError(409, str(error)) from error
    return CancelOut(**asked.answer())
