"""slack_bot: whether Slack refuses the install's bot token (its code, the scope a
`missing_scope` names, since when) and when `auth.test` is asked next, so every replica holds
that workspace's deliveries and claims until the token works again; none is refused at first

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

WHEN = sqlmodel.sql.sqltypes.UTCDateTime()
COLUMNS = ("refused_code", "refused_scope", "refused_since", "probe_at", "probe_wait_s")


def upgrade() -> None:
    with op.batch_alter_table("slack_bot") as batch:
        batch.add_column(
            sa.Column("refused_code", sqlmodel.sql.sqltypes.AutoString(length=60), nullable=True)
        )
        batch.add_column(
            sa.Column("refused_scope", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )
        batch.add_column(sa.Column("refused_since", WHEN, nullable=True))
        batch.add_column(sa.Column("probe_at", WHEN, nullable=True))
        batch.add_column(sa.Column("probe_wait_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slack_bot") as batch:
        for column in COLUMNS:
            batch.drop_column(column)
