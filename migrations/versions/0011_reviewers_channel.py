"""the channel whose reviewers decide a debate's review, chosen by the server when it is queued
(never a channel the requester named with --review-in)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.add_column(
            sa.Column(
                "reviewers_channel_id",
                sqlmodel.sql.sqltypes.AutoString(length=40),
                nullable=True,
            )
        )
    # A debate in a channel is decided by that channel's reviewers. A debate in a DM (the
    # assistant pane) was sent to a review channel that the requester may have named, which
    # cannot be told apart now: its review falls to the workspace admins.
    op.execute(
        "UPDATE debate SET reviewers_channel_id = channel_id"
        " WHERE channel_id IS NOT NULL AND channel_id NOT LIKE 'D%'"
    )


def downgrade() -> None:
    # A plain ALTER TABLE … DROP COLUMN (SQLite 3.35 and later), not a batch: SQLite's batch
    # recreates the table, which foreign keys from every other table forbid.
    op.drop_column("debate", "reviewers_channel_id")
