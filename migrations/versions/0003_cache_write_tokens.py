"""turn: tokens written to a prompt cache (billed apart by Anthropic)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.add_column(
            sa.Column("cache_write_input_tokens", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.drop_column("cache_write_input_tokens")
