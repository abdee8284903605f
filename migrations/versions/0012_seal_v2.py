"""audit seal v2: the seal's version on the verdict, and the digest of the debate row's sealed
content (question, spec, ending); verdicts that had no seal at all are marked as finished
before seals (version 0)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("verdict") as batch:
        batch.add_column(
            sa.Column("chain_version", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("chain_debate", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)
        )
    op.execute(
        "UPDATE verdict SET chain_version = 0 WHERE chain_turns IS NULL AND chain_tail IS NULL"
        " AND chain_head IS NULL AND chain_signature IS NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("verdict") as batch:
        batch.drop_column("chain_debate")
        batch.drop_column("chain_version")
