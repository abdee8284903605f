"""workspaces: every row that belongs to a Slack workspace records its team (and its Enterprise
Grid org), so one deployment can serve many; a channel's settings and a channel's own messages
are keyed by workspace too (a Slack Connect channel has one id in two workspaces); a debate can
be suspended while its workspace has uninstalled the app, and an uninstall records what it
stopped and dropped

A database from before holds one workspace's rows, but the migration cannot ask Slack which: its
rows get the team id `pending`, which a single-workspace deployment replaces with its own at
start-up, once auth.test names it (bot.store.tenancy.adopt_pending).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 14:00:00
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

PENDING_TEAM = "pending"
"""Written out: a migration must not change when the code does."""
TABLES = (
    "debate",
    "turn",
    "verdict",
    "escalation",
    "review",
    "feedback",
    "calibration_label",
    "weights_adoption",
    "channel_settings",
    "outbox",
    "processed_trigger",
)
TEXT40 = sqlmodel.sql.sqltypes.AutoString(length=40)
WHEN = sqlmodel.sql.sqltypes.UTCDateTime()


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("team_id", TEXT40, nullable=True))
            batch.add_column(sa.Column("enterprise_id", TEXT40, nullable=True))
        op.execute(sa.text(f"UPDATE {table} SET team_id = :team").bindparams(team=PENDING_TEAM))
        with op.batch_alter_table(table) as batch:
            batch.alter_column("team_id", existing_type=TEXT40, nullable=False)
        if table != "channel_settings":
            op.create_index(f"ix_{table}_team_id", table, ["team_id"])
    _primary_key("channel_settings", ["team_id", "channel_id"])
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("uq_outbox_channel_key", type_="unique")
        batch.create_unique_constraint("uq_outbox_channel_key", ["team_id", "channel_key"])
    with op.batch_alter_table("debate") as batch:
        batch.add_column(sa.Column("suspended_at", WHEN, nullable=True))
    with op.batch_alter_table("installation_event") as batch:
        for column in ("suspended_debates", "dropped_messages"):
            batch.add_column(sa.Column(column, sa.Integer(), nullable=False, server_default="0"))


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
    teams = op.get_bind().execute(sa.text("SELECT COUNT(DISTINCT team_id) FROM debate")).scalar()
    if teams and teams > 1:
        raise RuntimeError(
            f"the database holds {teams} workspaces' debates; the schema before 0020 holds one"
            " (delete the others' records with `debatebot workspace delete` first)"
        )
    with op.batch_alter_table("installation_event") as batch:
        batch.drop_column("dropped_messages")
        batch.drop_column("suspended_debates")
    with op.batch_alter_table("debate") as batch:
        batch.drop_column("suspended_at")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("uq_outbox_channel_key", type_="unique")
        batch.create_unique_constraint("uq_outbox_channel_key", ["channel_key"])
    _primary_key("channel_settings", ["channel_id"])
    for table in reversed(TABLES):
        if table != "channel_settings":
            op.drop_index(f"ix_{table}_team_id", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("enterprise_id")
            batch.drop_column("team_id")
