"""audit seal: the chain's head, tail, turn count and signature on the verdict (and the head
and count on the debate), written at finish

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 19:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

HASH = sqlmodel.sql.sqltypes.AutoString(length=64)


def upgrade() -> None:
    with op.batch_alter_table("verdict") as batch:
        batch.add_column(sa.Column("chain_turns", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("chain_tail", HASH, nullable=True))
        batch.add_column(sa.Column("chain_head", HASH, nullable=True))
        batch.add_column(sa.Column("chain_signature", HASH, nullable=True))
    with op.batch_alter_table("debate") as batch:
        batch.add_column(sa.Column("chain_head", HASH, nullable=True))
        batch.add_column(sa.Column("chain_turns", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_column("chain_turns")
        batch.drop_column("chain_head")
    with op.batch_alter_table("verdict") as batch:
        batch.drop_column("chain_signature")
        batch.drop_column("chain_head")
        batch.drop_column("chain_tail")
        batch.drop_column("chain_turns")
