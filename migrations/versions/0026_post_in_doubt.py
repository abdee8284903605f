"""post in doubt: an outbox row records when a post of it was last handed to Slack with no
answer recorded (`in_doubt_at`), so the next send looks for it in Slack first instead of posting
it a second time

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(
            sa.Column("in_doubt_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("in_doubt_at")
