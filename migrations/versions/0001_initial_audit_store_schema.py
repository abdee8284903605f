"""initial audit store schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 15:54:12.709739
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "channel_settings",
        sa.Column("channel_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("protocol", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("reviewers", sa.JSON(), nullable=False),
        sa.Column("owners", sa.JSON(), nullable=False),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        sa.Column("adr_watch", sa.Boolean(), nullable=False),
        sa.Column("trigger_reaction", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=False),
        sa.Column("updated_by", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("channel_id"),
    )
    op.create_table(
        "debate",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trigger_key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("channel_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("thread_ts", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("requested_by", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("protocol", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("lease_owner", sqlmodel.sql.sqltypes.AutoString(length=120), nullable=True),
        sa.Column("lease_expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
        sa.Column("decision", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("finished_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trigger_key"),
    )
    with op.batch_alter_table("debate", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_debate_channel_id"), ["channel_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_debate_lease_expires_at"), ["lease_expires_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_debate_state"), ["state"], unique=False)

    op.create_table(
        "escalation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("reviewers", sa.JSON(), nullable=False),
        sa.Column("message_ts", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["debate_id"],
            ["debate.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id"),
    )
    op.create_table(
        "processed_trigger",
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["debate_id"],
            ["debate.id"],
        ),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "turn",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("provider", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=False),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("prompt_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("request_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_input_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("reasks", sa.Integer(), nullable=False),
        sa.Column("raw_text", sa.Text(), nullable=False),
        sa.Column("parsed_json", sa.Text(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("prev_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["debate_id"],
            ["debate.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id", "round", "role", "attempt", name="uq_turn_key"),
        sa.UniqueConstraint("debate_id", "seq", name="uq_turn_seq"),
    )
    with op.batch_alter_table("turn", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_turn_debate_id"), ["debate_id"], unique=False)

    op.create_table(
        "verdict",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("decision", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("level", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("escalate", sa.Boolean(), nullable=False),
        sa.Column("synthesis", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["debate_id"],
            ["debate.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("debate_id"),
    )
    op.create_table(
        "review",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("escalation_id", sa.Integer(), nullable=False),
        sa.Column("debate_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=False),
        sa.Column("decision", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["debate_id"],
            ["debate.id"],
        ),
        sa.ForeignKeyConstraint(
            ["escalation_id"],
            ["escalation.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("escalation_id"),
    )
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_review_debate_id"), ["debate_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_review_debate_id"))

    op.drop_table("review")
    op.drop_table("verdict")
    with op.batch_alter_table("turn", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_turn_debate_id"))

    op.drop_table("turn")
    op.drop_table("processed_trigger")
    op.drop_table("escalation")
    with op.batch_alter_table("debate", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_debate_state"))
        batch_op.drop_index(batch_op.f("ix_debate_lease_expires_at"))
        batch_op.drop_index(batch_op.f("ix_debate_channel_id"))

    op.drop_table("debate")
    op.drop_table("channel_settings")
