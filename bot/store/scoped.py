"""One workspace's store, as the services that answer that workspace use it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.store.db import in_session
from bot.store.tenancy import Workspace

R = TypeVar("R")


@dataclass(kw_only=True, eq=False)
class WorkspaceStore:
    """A service of one workspace: its store work runs off the event loop and sees only that
    workspace's rows (`bot.store.db.in_session`)."""

    engine: Engine
    workspace: Workspace

    async def db(self, work: Callable[[Session], R]) -> R:
        """Run `work` on the store, in this workspace."""
        return await in_session(self.engine, work, workspace=self.workspace)
