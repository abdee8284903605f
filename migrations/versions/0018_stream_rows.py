"""stream rows: a debate's live plan, streamed into its thread, is an outbox row of its own
(action `stream`) that records where its message stands (`stream_state`), the thread it is in
(`stream_thread_ts`) and the chunks Slack has taken (`streamed`)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# The values as they stand today, written out: a migration must not change when the code does.
ACTIONS = ("post", "update")
ACTIONS_WITH_STREAM = (*ACTIONS, "stream")
STREAM_STATES = ("starting", "open", "message", "closed", "refused")


def _listed(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("ck_outbox_action", type_="check")
        batch.create_check_constraint(
            "ck_outbox_action", f"action IN ({_listed(ACTIONS_WITH_STREAM)})"
        )
        batch.add_column(sa.Column("stream_state", sa.String(length=20), nullable=True))
        batch.create_check_constraint(
            "ck_outbox_stream_state", f"stream_state IN ({_listed(STREAM_STATES)})"
        )
        batch.add_column(sa.Column("streamed", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(
            sa.Column(
                "stream_thread_ts", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True
            )
        )


def downgrade() -> None:
    # A stream row has no meaning to the code before this revision: drop it.
    op.execute("DELETE FROM outbox WHERE action = 'stream'")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("stream_thread_ts")
        batch.drop_column("streamed")
        batch.drop_constraint("ck_outbox_stream_state", type_="check")
        batch.drop_column("stream_state")
        batch.drop_constraint("ck_outbox_action", type_="check")
        batch.create_check_constraint("ck_outbox_action", f"action IN ({_listed(ACTIONS)})")
