"""Which Slack workspace a unit of store work belongs to, and the guard that keeps it there.

Every session the store opens has a scope (`session_scope`, `in_session`: a required keyword).
A `Workspace` scope filters every ORM read, update and delete of a workspace's rows
(`WorkspaceOwned`) by its team id, stamps new rows with it and refuses a row of another
workspace, and refuses a Core statement on those tables (which no filter would reach). The store's
functions therefore need no team argument of their own and cannot be called unscoped: a caller
that forgets the workspace does not compile, and one that names it cannot see another's rows.

`EVERY_WORKSPACE` is the scope of the work that serves all workspaces at once (the worker's
claims and turns, the delivery loop, scheduled jobs, retention): nothing is filtered, and a new
row takes its team from its debate, or must name it.

A session made without `session_scope` (a test's `Session(engine)`) is scoped to
`PENDING_WORKSPACE`, the team id the schema migration gave an existing database's rows until
the workspace's own id is known (`adopt_pending`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar, cast

from sqlalchemy import ClauseElement, Table, delete, event, update
from sqlalchemy import select as sql_select
from sqlalchemy.orm import ORMExecuteState, Session, with_loader_criteria
from sqlalchemy.sql.util import find_tables

# Every module of a workspace's tables, so `WorkspaceOwned.__subclasses__()` lists them all
# before a session reads one (tests/unit/test_store_tables.py holds the list complete).
import bot.store.calibration_tables
import bot.store.channel_tables
import bot.store.dedupe_tables
import bot.store.held_tables
import bot.store.outbox_tables
import bot.store.receipt_tables
import bot.store.review_tables
import bot.store.threshold_tables  # noqa: F401  (registers its tables, as each above does)
from bot.store.columns import WorkspaceOwned
from bot.store.debate_tables import Debate
from bot.store.errors import WorkspaceScopeError

PENDING_TEAM = "pending"
"""The team id migration 0020 gave the rows of a database from before workspaces: a
single-workspace deployment replaces it with its workspace's id at start-up (`adopt_pending`)."""
SCOPE_KEY = "debatebot.workspace"


@dataclass(frozen=True)
class Workspace:
    """One Slack workspace: its team id and, on Enterprise Grid, its org's id."""

    team_id: str
    enterprise_id: str | None = None
    with_pending: bool = False
    """Read the rows still waiting for their workspace's id (`PENDING_TEAM`) as this one's too:
    a single-workspace deployment, whose terminal commands (`debatebot run`, `calibration
    import-eval`) write them before a bot learns the id (`adopt_pending`)."""

    def __post_init__(self) -> None:
        if not self.team_id:
            raise WorkspaceScopeError("a workspace needs its team id")


class EveryWorkspace(Enum):
    """The scope of work done for all workspaces at once."""

    EVERY = "every"


EVERY_WORKSPACE = EveryWorkspace.EVERY
PENDING_WORKSPACE = Workspace(team_id=PENDING_TEAM)
Scope = Workspace | EveryWorkspace


def tenant_tables() -> frozenset[Table]:
    """The tables whose rows belong to one workspace."""
    return frozenset(owned.__table__ for owned in _TENANT_CLASSES)


def _is_tenant(table: Any) -> bool:
    return table in _TENANT_TABLES


_TENANT_CLASSES: tuple[Any, ...] = tuple(
    owned for owned in WorkspaceOwned.__subclasses__() if hasattr(owned, "__table__")
)
_TENANT_TABLES = tenant_tables()


_ONCE_PER_WORKSPACE = {
    "processed_trigger": "key",
    "calibration_label": "key",
    "channel_settings": "channel_id",
    "outbox": "channel_key",
}
"""The tables whose rows are unique per workspace by a column other than the debate (table:
column): `adopt_pending` drops a pending row whose value the workspace holds already."""


def scope_for(team_id: str | None) -> Scope:
    """An operator's scope: one workspace by its team id, or every workspace (None)."""
    return Workspace(team_id=team_id) if team_id else EVERY_WORKSPACE


def owner_of(row: WorkspaceOwned) -> Workspace:
    """The workspace a stored row belongs to."""
    if row.team_id is None:
        raise WorkspaceScopeError(f"this {type(row).__name__} was never stored in a workspace")
    return Workspace(team_id=row.team_id, enterprise_id=row.enterprise_id)


S = TypeVar("S", bound=Session)


def scoped(session: S, scope: Scope) -> S:
    """Give `session` its scope (once: a session never changes workspace)."""
    current = session.info.get(SCOPE_KEY)
    if current is not None and current != scope:
        raise WorkspaceScopeError("a session's workspace cannot change")
    session.info[SCOPE_KEY] = scope
    return session


def scope_of(session: Session) -> Scope:
    scope = session.info.get(SCOPE_KEY)
    return scope if scope is not None else PENDING_WORKSPACE


def workspace_of(session: Session) -> Workspace:
    """The one workspace `session` works for; WorkspaceScopeError for work done for every
    workspace, which must name the workspace it means."""
    scope = scope_of(session)
    if not isinstance(scope, Workspace):
        raise WorkspaceScopeError(
            "this store function belongs to one workspace and was called for every workspace"
        )
    return scope


@event.listens_for(Session, "do_orm_execute")
def _filter(state: ORMExecuteState) -> None:
    """Keep a workspace's statements to its rows: ORM ones filtered, Core ones refused."""
    scope = scope_of(state.session)
    if not isinstance(scope, Workspace):
        return
    if not state.is_orm_statement:
        touched = find_tables(cast(ClauseElement, state.statement), include_crud=True)
        if any(_is_tenant(table) for table in touched):
            raise WorkspaceScopeError(
                "a Core statement on a workspace's table cannot be filtered by workspace; use"
                " the ORM, or run it for every workspace"
            )
        return
    if state.is_select or state.is_update or state.is_delete:
        teams = _teams(scope)
        state.statement = state.statement.options(
            *(
                with_loader_criteria(owned, owned.team_id.in_(teams), include_aliases=True)
                for owned in _TENANT_CLASSES
            )
        )


def _teams(scope: Workspace) -> tuple[str, ...]:
    return (scope.team_id, PENDING_TEAM) if scope.with_pending else (scope.team_id,)


@event.listens_for(Session, "before_flush")
def _stamp(session: Session, _context: Any, _instances: Any) -> None:
    """New rows take the session's workspace (or, for every workspace, their debate's); a row
    of another workspace is refused, new or changed."""
    scope = scope_of(session)
    for row in session.new:
        if isinstance(row, WorkspaceOwned):
            _stamp_row(session, row, scope)
    for row in session.dirty:
        if (
            isinstance(row, WorkspaceOwned)
            and isinstance(scope, Workspace)
            and row.team_id not in _teams(scope)
        ):
            raise WorkspaceScopeError(
                f"a row of workspace {row.team_id} cannot be written for {scope.team_id}"
            )


def _stamp_row(session: Session, row: WorkspaceOwned, scope: Scope) -> None:
    if isinstance(scope, Workspace):
        if row.team_id is None:
            row.team_id = scope.team_id
            row.enterprise_id = row.enterprise_id or scope.enterprise_id
        elif row.team_id not in _teams(scope):
            raise WorkspaceScopeError(
                f"a row of workspace {row.team_id} cannot be written for {scope.team_id}"
            )
        return
    if row.team_id is not None:
        return
    debate_id = getattr(row, "debate_id", None)
    debate = session.get(Debate, debate_id) if debate_id is not None else None
    if debate is None or debate.team_id is None:
        raise WorkspaceScopeError(
            f"a new {type(row).__name__} written for every workspace must name its workspace"
        )
    row.team_id = debate.team_id
    row.enterprise_id = row.enterprise_id or debate.enterprise_id


def adopt_pending(session: Session, *, workspace: Workspace) -> int:
    """Give the rows migrated from before workspaces (team `pending`) `workspace`'s id, once
    a single-workspace deployment knows it (auth.test at start-up); how many rows moved.
    Committed. Run for every workspace.

    A pending handled-trigger key, calibration label, channel's settings or channel message
    whose key the workspace holds already is dropped, not moved: keys are unique per workspace,
    and the workspace's row is the same trigger handled, the same eval result imported (a
    terminal's `calibration import-eval` run again after the bot learnt the id), the channel's
    settings saved since (the bot read the pending ones as its own until then, so the newer
    ones win), or the same channel message owed. A debate's key cannot meet its twin so: the
    bot reads the pending debates as its own, and a terminal's `run` keys are random."""
    if scope_of(session) is not EVERY_WORKSPACE:
        raise WorkspaceScopeError("adopting the pending rows is work for every workspace")
    for table in tenant_tables():
        if table.name in _ONCE_PER_WORKSPACE:
            column = table.c[_ONCE_PER_WORKSPACE[table.name]]
            held = sql_select(column).where(
                table.c.team_id == workspace.team_id, column.is_not(None)
            )
            session.connection().execute(
                delete(table).where(table.c.team_id == PENDING_TEAM, column.in_(held))
            )
    moved = 0
    for table in sorted(tenant_tables(), key=lambda table: table.name):
        result = session.connection().execute(
            update(table)
            .where(table.c.team_id == PENDING_TEAM)
            .values(team_id=workspace.team_id, enterprise_id=workspace.enterprise_id)
        )
        moved += result.rowcount
    session.commit()
    return moved
