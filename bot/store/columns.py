"""What the store's tables share: a column holding an enum's values under a CHECK
constraint, and the columns of a row that belongs to one Slack workspace. Alembic
(`migrations/`) owns the schema built from the tables (`bot/store/*_tables.py`).

Timestamps are timezone-aware UTC (SQLModel's `UTCDateTime` refuses naive ones), so the turn hash
chain recomputes identically on SQLite and PostgreSQL.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import Column
from sqlalchemy import Enum as SqlEnum
from sqlmodel import Field, SQLModel


def enum_column(
    enum: type[StrEnum],
    *,
    name: str,
    length: int,
    nullable: bool = False,
    index: bool = False,
    default: StrEnum | None = None,
) -> Column[Any]:
    """A column holding one of `enum`'s values as a string (not a database enum type, so a new
    value needs no type migration), with a CHECK constraint `name` that refuses any other."""
    kind = SqlEnum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=length,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )
    return Column(kind, nullable=nullable, index=index, default=default)


class WorkspaceOwned(SQLModel):
    """The columns of a row that belongs to one Slack workspace (issue 37): its team and, on
    Enterprise Grid, its org. The store stamps them and filters every read and write by them
    (bot.store.tenancy); a row is never read into another workspace's answer."""

    team_id: str | None = Field(default=None, max_length=40, index=True, nullable=False)
    """Slack's team id of the workspace (None only until the store stamps it)."""
    enterprise_id: str | None = Field(default=None, max_length=40)
