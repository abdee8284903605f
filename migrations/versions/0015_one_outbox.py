"""one outbox: what a channel is owed with no debate (the daily digest) becomes an outbox row
with no debate, delivered by the same loop as every other message; the channel_notice table
and its rows move into the outbox

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TEXT40 = sqlmodel.sql.sqltypes.AutoString(length=40)
TEXT120 = sqlmodel.sql.sqltypes.AutoString(length=120)
CHANNEL_KEY = sqlmodel.sql.sqltypes.AutoString(length=170)
WHEN = sqlmodel.sql.sqltypes.UTCDateTime()
NOTICES = sa.table(
    "channel_notice",
    sa.column("key", TEXT120),
    sa.column("channel_id", TEXT40),
    sa.column("text", sa.Text()),
    sa.column("blocks", sa.JSON()),
    sa.column("state", TEXT40),
    sa.column("attempts", sa.Integer()),
    sa.column("next_attempt_at", WHEN),
    sa.column("deadline_at", WHEN),
    sa.column("last_error", sa.Text()),
    sa.column("ts", TEXT40),
    sa.column("created_at", WHEN),
)
OUTBOX = sa.table(
    "outbox",
    sa.column("debate_id", sa.Integer()),
    sa.column("key", TEXT120),
    sa.column("channel_key", sqlmodel.sql.sqltypes.AutoString(length=170)),
    sa.column("seq", sa.Integer()),
    sa.column("part", sa.Integer()),
    sa.column("action", TEXT40),
    sa.column("target", TEXT40),
    sa.column("recipients", sa.JSON()),
    sa.column("fallback", TEXT40),
    sa.column("channel_id", TEXT40),
    sa.column("text", sa.Text()),
    sa.column("blocks", sa.JSON()),
    sa.column("state", TEXT40),
    sa.column("version", sa.Integer()),
    sa.column("attempts", sa.Integer()),
    sa.column("next_attempt_at", WHEN),
    sa.column("deadline_at", WHEN),
    sa.column("last_error", sa.Text()),
    sa.column("deliveries", sa.JSON()),
    sa.column("delivered_to", sa.Text()),
    sa.column("created_at", WHEN),
    sa.column("sent_at", WHEN),
)


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.alter_column("debate_id", existing_type=sa.Integer(), nullable=True)
        batch.add_column(sa.Column("channel_key", CHANNEL_KEY, nullable=True))
        batch.create_unique_constraint("uq_outbox_channel_key", ["channel_key"])
    connection = op.get_bind()
    rows = connection.execute(sa.select(NOTICES)).mappings().all()
    if rows:
        op.bulk_insert(
            OUTBOX,
            [
                {
                    "debate_id": None,
                    "key": row["key"],
                    "channel_key": f"{row['channel_id']}:{row['key']}",
                    "seq": 0,
                    "part": 0,
                    "action": "post",
                    "target": "channel",
                    "recipients": [],
                    "fallback": "none",
                    "channel_id": row["channel_id"],
                    "text": row["text"],
                    "blocks": row["blocks"],
                    "state": row["state"],
                    "version": 1,
                    "attempts": row["attempts"],
                    "next_attempt_at": row["next_attempt_at"],
                    "deadline_at": row["deadline_at"],
                    "last_error": row["last_error"],
                    "deliveries": [[row["channel_id"], row["ts"]]] if row["ts"] else [],
                    "delivered_to": "channel" if row["ts"] else None,
                    "created_at": row["created_at"],
                    "sent_at": row["created_at"] if row["ts"] else None,
                }
                for row in rows
            ],
        )
    op.drop_index("ix_channel_notice_state", table_name="channel_notice")
    op.drop_table("channel_notice")


def downgrade() -> None:
    op.create_table(
        "channel_notice",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", TEXT120, nullable=False, unique=True),
        sa.Column("channel_id", TEXT40, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("blocks", sa.JSON(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=False),
        sa.Column("deadline_at", WHEN, nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("ts", TEXT40, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
    )
    op.create_index("ix_channel_notice_state", "channel_notice", ["state"])
    connection = op.get_bind()
    owed = (
        connection.execute(sa.select(OUTBOX).where(OUTBOX.c.debate_id.is_(None))).mappings().all()
    )
    if owed:
        op.bulk_insert(
            NOTICES,
            [
                {
                    "key": row["key"],
                    "channel_id": row["channel_id"],
                    "text": row["text"],
                    "blocks": row["blocks"],
                    "state": row["state"] if row["state"] != "split" else "failed",
                    "attempts": row["attempts"],
                    "next_attempt_at": row["next_attempt_at"],
                    "deadline_at": row["deadline_at"],
                    "last_error": row["last_error"],
                    "ts": row["deliveries"][0][1] if row["deliveries"] else None,
                    "created_at": row["created_at"],
                }
                for row in owed
            ],
        )
    connection.execute(sa.delete(OUTBOX).where(OUTBOX.c.debate_id.is_(None)))
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("uq_outbox_channel_key", type_="unique")
        batch.drop_column("channel_key")
        batch.alter_column("debate_id", existing_type=sa.Integer(), nullable=False)
