"""slack surface: message ledger and forked debates

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 16:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_post",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=False),
        sa.Column("channel_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("ts", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("reserved_by", sqlmodel.sql.sqltypes.AutoString(length=120), nullable=False),
        sa.Column("reserved_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("posted_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["debate_id"], ["debate.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id", "key", name="uq_slack_post_key"),
    )
    op.create_index(op.f("ix_slack_post_debate_id"), "slack_post", ["debate_id"], unique=False)
    with op.batch_alter_table("debate") as batch:
        batch.add_column(sa.Column("parent_debate_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            "fk_debate_parent_debate_id", "debate", ["parent_debate_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("fk_debate_parent_debate_id", type_="foreignkey")
        batch.drop_column("parent_debate_id")
    op.drop_index(op.f("ix_slack_post_debate_id"), table_name="slack_post")
    op.drop_table("slack_post")
