"""a channel's own ADR title pattern, and its switch for verdict comments on linked pull
requests, and the link a debate's ADR came from

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 04:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.add_column(
            sa.Column("link", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True)
        )
    with op.batch_alter_table("channel_settings") as batch:
        batch.add_column(
            sa.Column("adr_pattern", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )
        batch.add_column(
            sa.Column("pr_comment", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_column("link")
    with op.batch_alter_table("channel_settings") as batch:
        batch.drop_column("pr_comment")
        batch.drop_column("adr_pattern")
