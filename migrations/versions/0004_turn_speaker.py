"""turn: the speaker, for protocols where one role has several debaters

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.add_column(
            sa.Column("speaker", sa.String(length=60), nullable=False, server_default="")
        )
        batch.drop_constraint("uq_turn_key", type_="unique")
        batch.create_unique_constraint(
            "uq_turn_key", ["debate_id", "round", "role", "speaker", "attempt"]
        )


def downgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.drop_constraint("uq_turn_key", type_="unique")
        batch.create_unique_constraint("uq_turn_key", ["debate_id", "round", "role", "attempt"])
        batch.drop_column("speaker")
