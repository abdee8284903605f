"""turn: the output tokens a model spent thinking (Anthropic's thinking, OpenAI's reasoning),
a part of its output tokens, reported apart

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.add_column(
            sa.Column("reasoning_tokens", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.drop_column("reasoning_tokens")
