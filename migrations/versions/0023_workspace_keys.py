"""workspace keys: a debate's trigger key, a handled trigger's key and a calibration label's key
are unique in their workspace, not across the deployment. They are built from Slack's ids, which
are not unique across workspaces (a channel shared by two workspaces of an Enterprise Grid org
has one id and one message ts in both), so one workspace's key must not stop another's trigger.

The keys held are unique across the deployment before, so they are unique per workspace after:
no row changes. The way back refuses a database where two workspaces hold one key.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 12:00:00
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

UNIQUE_KEYS = {
    "debate": ("trigger_key", "uq_debate_team_trigger_key"),
    "calibration_label": ("key", "uq_calibration_label_team_key"),
}
"""Table: its key column and the name of its (team, key) constraint."""
FORMER = {"uq": "former_%(table_name)s_%(column_0_name)s"}
"""SQLite keeps the former key's UNIQUE unnamed: a batch's copy of the table names it so, to
drop it."""


def upgrade() -> None:
    for table, (column, name) in UNIQUE_KEYS.items():
        with op.batch_alter_table(table, naming_convention=FORMER) as batch:
            batch.drop_constraint(_former_unique(table, column), type_="unique")
            batch.create_unique_constraint(name, ["team_id", column])
    # The primary key now leads with the team, which makes the team's own index needless; a
    # Slack event id is looked up across workspaces, by the key alone.
    op.drop_index("ix_processed_trigger_team_id", table_name="processed_trigger")
    _primary_key("processed_trigger", ["team_id", "key"])
    op.create_index("ix_processed_trigger_key", "processed_trigger", ["key"])


def _former_unique(table: str, column: str) -> str:
    """The name of the single-column UNIQUE of 0001 and 0016: PostgreSQL's default, or the one
    FORMER gives SQLite's unnamed constraint."""
    if op.get_bind().dialect.name == "sqlite":
        return f"former_{table}_{column}"
    return f"{table}_{column}_key"


def _primary_key(table: str, columns: list[str]) -> None:
    """Replace `table`'s primary key: SQLite's is unnamed and goes with the copy a batch makes,
    PostgreSQL's has its default name."""
    with warnings.catch_warnings():
        # SQLite's copy is declared with the old key first; alembic replaces it, and says so.
        warnings.filterwarnings("ignore", message=f".*_alembic_tmp_{table}.*primary_key")
        with op.batch_alter_table(table, recreate="always") as batch:
            if op.get_bind().dialect.name != "sqlite":
                batch.drop_constraint(f"{table}_pkey", type_="primary")
            batch.create_primary_key(f"{table}_pkey", columns)


def downgrade() -> None:
    bind = op.get_bind()
    for table, column in (
        *((t, c) for t, (c, _) in UNIQUE_KEYS.items()),
        ("processed_trigger", "key"),
    ):
        shared = bind.execute(
            sa.text(
                f"SELECT COUNT(*) FROM (SELECT {column} FROM {table} GROUP BY {column}"
                f" HAVING COUNT(*) > 1) AS shared"
            )
        ).scalar()
        if shared:
            raise RuntimeError(
                f"{shared} {table}.{column} value(s) are held by more than one workspace; the"
                " schema before 0023 holds each once (delete the other workspaces' records"
                " with `debatebot workspace delete` first)"
            )
    op.drop_index("ix_processed_trigger_key", table_name="processed_trigger")
    _primary_key("processed_trigger", ["key"])
    op.create_index("ix_processed_trigger_team_id", "processed_trigger", ["team_id"])
    for table, (column, name) in UNIQUE_KEYS.items():
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="unique")
            batch.create_unique_constraint(_former_unique(table, column), [column])
