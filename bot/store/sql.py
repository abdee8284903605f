"""SQL shared by the store's modules: the tables as Core objects, a membership test that is one
parameter on both backends, a unique insert, a read of rows as the database holds them now, and
the count of rows a statement changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Result, ScalarResult, Table, any_, bindparam
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, select

from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import Debate, Turn, VerdictRecord
from bot.store.review_tables import Escalation


def _table(model: type[SQLModel]) -> Table:
    """The model's Core table, from the metadata it registered in: SQLModel sets `__table__`
    only at runtime, so mypy cannot see it there."""
    return SQLModel.metadata.tables[str(model.__tablename__)]


# The hot path's statements, built once: constructing one costs more than running it on SQLite.
DEBATES = _table(Debate)
TURNS = _table(Turn)
VERDICTS = _table(VerdictRecord)
ESCALATIONS = _table(Escalation)
CHANNELS = _table(ChannelSettings)


def insert_once(session: Session, row: SQLModel) -> bool:
    """Insert and commit a row whose key makes it unique; False (rolled back) when a row with
    that key was there already."""
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


M = TypeVar("M", bound=SQLModel)


def as_stored(
    session: Session, model: type[M], where: ColumnElement[bool] | bool
) -> ScalarResult[M]:
    """The rows of `model` matching `where` as the database now holds them: objects the session
    already has are refreshed, not answered from its identity map (what a statement that
    bypassed the session, such as a conditional UPDATE, left)."""
    return session.exec(select(model).where(where).execution_options(populate_existing=True))


def rows_changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE changed. `Session.execute` is typed to return a
    `Result`; for those statements it is a `CursorResult`, the one that counts them."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"expected the result of an UPDATE or DELETE, got {type(result).__name__}")
    return result.rowcount


def member_of(
    dialect: str, column: Any, *, key: str | None = None, values: Sequence[Any] | None = None
) -> ColumnElement[bool]:
    """`column IN (...)` over one parameter (`key` when the statement is built once, `values`
    for a batch's own). On PostgreSQL it is `column = ANY(array)`, one SQL text whatever the
    batch's size: an IN list of each new length is a new statement for psycopg to convert and
    for the server to plan, where the array form is one (and psycopg prepares it once it
    repeats)."""
    listed = None if values is None else list(values)
    if dialect == "postgresql":
        # Imported here: a SQLite deployment never loads the PostgreSQL dialect.
        from sqlalchemy.dialects.postgresql import ARRAY

        array = bindparam(key, listed, type_=ARRAY(column.type))
        return cast(ColumnElement[bool], column == any_(array))
    return cast(ColumnElement[bool], column.in_(bindparam(key, listed, expanding=True)))


def among(session: Session, column: Any, values: Sequence[Any]) -> ColumnElement[bool]:
    """`column IN values` for a batch, in the session's dialect (see `member_of`)."""
    return member_of(session.get_bind().dialect.name, column, values=values)
