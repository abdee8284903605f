"""outbox: every message a debate owes, delivered with retries; debate.halt_reason

The `slack_post` ledger becomes the `outbox`: messages already posted move over as sent rows
(their ts kept, so nothing is posted again); reservations that never got a ts are dropped, as
the new delivery loop writes its own rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 18:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TEXT = sqlmodel.sql.sqltypes.AutoString
WHEN = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    outbox = op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("key", TEXT(length=120), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("action", TEXT(length=10), nullable=False),
        sa.Column("target", TEXT(length=10), nullable=False),
        sa.Column("target_key", TEXT(length=120), nullable=True),
        sa.Column("recipients", sa.JSON(), nullable=False),
        sa.Column("fallback", TEXT(length=20), nullable=False),
        sa.Column("channel_id", TEXT(length=40), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("blocks", sa.JSON(), nullable=False),
        sa.Column("state", TEXT(length=20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN(), nullable=False),
        sa.Column("deadline_at", WHEN(), nullable=False),
        sa.Column("claimed_by", TEXT(length=120), nullable=True),
        sa.Column("claimed_until", WHEN(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("deliveries", sa.JSON(), nullable=False),
        sa.Column("delivered_to", TEXT(length=400), nullable=True),
        sa.Column("created_at", WHEN(), nullable=False),
        sa.Column("sent_at", WHEN(), nullable=True),
        sa.ForeignKeyConstraint(["debate_id"], ["debate.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id", "key", name="uq_outbox_key"),
    )
    op.create_index(op.f("ix_outbox_debate_id"), "outbox", ["debate_id"], unique=False)
    op.create_index(op.f("ix_outbox_state"), "outbox", ["state"], unique=False)
    with op.batch_alter_table("debate") as batch:
        batch.add_column(sa.Column("halt_reason", sa.Text(), nullable=True))

    connection = op.get_bind()
    posted = connection.execute(
        sa.text(
            "SELECT id, debate_id, key, channel_id, ts, reserved_at, posted_at"
            " FROM slack_post WHERE ts IS NOT NULL ORDER BY id"
        )
    ).all()
    if posted:
        op.bulk_insert(
            outbox,
            [
                {
                    "debate_id": row.debate_id,
                    "key": row.key,
                    "seq": row.id,
                    "part": 0,
                    "action": "post",
                    "target": "channel" if row.key == "parent" else "thread",
                    "target_key": None,
                    "recipients": [],
                    "fallback": "none",
                    "channel_id": row.channel_id,
                    "text": "",
                    "blocks": [],
                    "state": "sent",
                    "version": 1,
                    "attempts": 1,
                    "next_attempt_at": row.reserved_at,
                    "deadline_at": row.reserved_at,
                    "claimed_by": None,
                    "claimed_until": None,
                    "last_error": None,
                    "deliveries": [[row.channel_id, row.ts]],
                    "delivered_to": "migrated from slack_post",
                    "created_at": row.reserved_at,
                    "sent_at": row.posted_at,
                }
                for row in posted
            ],
        )
    op.drop_index(op.f("ix_slack_post_debate_id"), table_name="slack_post")
    op.drop_table("slack_post")


def downgrade() -> None:
    op.create_table(
        "slack_post",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("key", TEXT(length=80), nullable=False),
        sa.Column("channel_id", TEXT(length=40), nullable=False),
        sa.Column("ts", TEXT(length=40), nullable=True),
        sa.Column("reserved_by", TEXT(length=120), nullable=False),
        sa.Column("reserved_at", WHEN(), nullable=False),
        sa.Column("posted_at", WHEN(), nullable=True),
        sa.ForeignKeyConstraint(["debate_id"], ["debate.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id", "key", name="uq_slack_post_key"),
    )
    op.create_index(op.f("ix_slack_post_debate_id"), "slack_post", ["debate_id"], unique=False)
    with op.batch_alter_table("debate") as batch:
        batch.drop_column("halt_reason")
    op.drop_index(op.f("ix_outbox_state"), table_name="outbox")
    op.drop_index(op.f("ix_outbox_debate_id"), table_name="outbox")
    op.drop_table("outbox")
