"""triage before debate, feedback on verdicts, assistant threads' review channel, and turn
phases: the debate's triage state and reason and review channel, the channel's triage and route
switches, one feedback row per person and debate, and the phase in a turn's key (a consensus
debater speaks once per phase of a round)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 21:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.add_column(sa.Column("phase", _text(40), nullable=False, server_default=""))
        batch.drop_constraint("uq_turn_key", type_="unique")
        batch.create_unique_constraint(
            "uq_turn_key", ["debate_id", "round", "role", "speaker", "phase", "attempt"]
        )
    with op.batch_alter_table("debate") as batch:
        batch.add_column(sa.Column("triage", _text(20), nullable=True))
        batch.add_column(sa.Column("triage_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("review_channel_id", _text(40), nullable=True))
    with op.batch_alter_table("channel_settings") as batch:
        batch.add_column(
            sa.Column("triage", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column("route", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("debate_id", sa.Integer(), sa.ForeignKey("debate.id"), nullable=False),
        sa.Column("user_id", _text(40), nullable=False),
        sa.Column("value", _text(10), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.UniqueConstraint("debate_id", "user_id", name="uq_feedback_person"),
    )
    op.create_index("ix_feedback_debate_id", "feedback", ["debate_id"])


def downgrade() -> None:
    op.drop_index("ix_feedback_debate_id", table_name="feedback")
    op.drop_table("feedback")
    with op.batch_alter_table("channel_settings") as batch:
        batch.drop_column("route")
        batch.drop_column("triage")
    with op.batch_alter_table("debate") as batch:
        batch.drop_column("review_channel_id")
        batch.drop_column("triage_reason")
        batch.drop_column("triage")
    with op.batch_alter_table("turn") as batch:
        batch.drop_constraint("uq_turn_key", type_="unique")
        batch.create_unique_constraint(
            "uq_turn_key", ["debate_id", "round", "role", "speaker", "attempt"]
        )
        batch.drop_column("phase")
