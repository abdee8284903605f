"""held_trigger: Slack events kept for later (a reaction, an ADR post, a message to the agent
that came while Slack refused the workspace's bot token, or while Slack failed to give what it
needs), each once per workspace and Slack event id, replayed when the token works again or at
their time; none at first

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

WHEN = sqlmodel.sql.sqltypes.UTCDateTime()


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "held_trigger",
        sa.Column("team_id", _text(40), nullable=False),
        sa.Column("enterprise_id", _text(40), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", _text(255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("user_id", _text(40), nullable=True),
        sa.Column("channel_id", _text(40), nullable=True),
        sa.Column(
            "reason",
            sa.Enum(
                "token_refused",
                "slack_failed",
                name="ck_held_trigger_reason",
                native_enum=False,
                create_constraint=True,
                length=20,
            ),
            nullable=False,
        ),
        sa.Column("event_at", WHEN, nullable=False),
        sa.Column("due_at", WHEN, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_by", _text(200), nullable=True),
        sa.Column("claimed_until", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("team_id", "key", name="uq_held_trigger_team_key"),
    )
    op.create_index("ix_held_trigger_team_id", "held_trigger", ["team_id"])
    op.create_index("ix_held_trigger_due_at", "held_trigger", ["due_at"])


def downgrade() -> None:
    op.drop_index("ix_held_trigger_due_at", table_name="held_trigger")
    op.drop_index("ix_held_trigger_team_id", table_name="held_trigger")
    op.drop_table("held_trigger")
