"""receipt_part: each finished debate's signed decision receipt and the signed statements of the
human decisions on it (issue 46). Debates finished before have none; nothing is backfilled.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString
WHEN = sqlmodel.sql.sqltypes.UTCDateTime()


def upgrade() -> None:
    op.create_table(
        "receipt_part",
        sa.Column("team_id", TEXT(length=40), nullable=False),
        sa.Column("enterprise_id", TEXT(length=40), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column(
            "kind",
            sa.Enum(
                "receipt",
                "decision",
                name="ck_receipt_part_kind",
                native_enum=False,
                create_constraint=True,
                length=20,
            ),
            nullable=False,
        ),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("key_id", TEXT(length=80), nullable=True),
        sa.Column("signature", TEXT(length=120), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(["debate_id"], ["debate.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id", "part", name="uq_receipt_part"),
    )
    op.create_index("ix_receipt_part_debate_id", "receipt_part", ["debate_id"])
    op.create_index("ix_receipt_part_team_id", "receipt_part", ["team_id"])


def downgrade() -> None:
    op.drop_index("ix_receipt_part_team_id", table_name="receipt_part")
    op.drop_index("ix_receipt_part_debate_id", table_name="receipt_part")
    op.drop_table("receipt_part")
