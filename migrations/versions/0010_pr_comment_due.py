"""when a linked debate's pull request comment fell behind, so a host's refusal is retried

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.add_column(
            sa.Column("pr_comment_due", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
        batch.create_index("ix_debate_pr_comment_due", ["pr_comment_due"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_index("ix_debate_pr_comment_due")
        batch.drop_column("pr_comment_due")
