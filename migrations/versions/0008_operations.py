"""operations: channel budgets, review SLA and digest settings, scheduled job runs (one per slot
across replicas), and notices owed to a channel (the daily digest)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 03:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    with op.batch_alter_table("channel_settings") as batch:
        batch.add_column(sa.Column("monthly_budget_usd", sa.Float(), nullable=True))
        batch.add_column(sa.Column("review_sla_h", sa.Float(), nullable=True))
        batch.add_column(sa.Column("digest_time", _text(5), nullable=True))
        batch.add_column(sa.Column("timezone", _text(64), nullable=False, server_default="UTC"))
    op.create_table(
        "scheduled_run",
        sa.Column("job", _text(40), primary_key=True),
        sa.Column("slot", _text(40), primary_key=True),
        sa.Column("runner", _text(120), nullable=False),
        sa.Column("outcome", _text(20), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("finished_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    )
    op.create_table(
        "channel_notice",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", _text(120), nullable=False, unique=True),
        sa.Column("channel_id", _text(40), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("blocks", sa.JSON(), nullable=False),
        sa.Column("state", _text(20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("deadline_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("ts", _text(40), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.create_index("ix_channel_notice_state", "channel_notice", ["state"])


def downgrade() -> None:
    op.drop_index("ix_channel_notice_state", table_name="channel_notice")
    op.drop_table("channel_notice")
    op.drop_table("scheduled_run")
    with op.batch_alter_table("channel_settings") as batch:
        batch.drop_column("timezone")
        batch.drop_column("digest_time")
        batch.drop_column("review_sla_h")
        batch.drop_column("monthly_budget_usd")
