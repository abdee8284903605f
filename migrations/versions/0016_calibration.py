"""calibration: labels for the verdicts' confidence (reviews, evals, feedback), the versions of
the confidence weights and their adoptions, and the escalations drawn as a random sample of the
verdicts that did not escalate

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# The values as they stand today, written out: a migration must not change when the code does.
LABEL_KINDS = ("review", "eval", "feedback")
WHEN = sqlmodel.sql.sqltypes.UTCDateTime()


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    with op.batch_alter_table("escalation") as batch:
        batch.add_column(
            sa.Column("sample", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    kinds = ", ".join(f"'{kind}'" for kind in LABEL_KINDS)
    op.create_table(
        "calibration_label",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", _text(255), nullable=False, unique=True),
        sa.Column("kind", _text(20), nullable=False),
        sa.Column("debate_id", sa.Integer(), sa.ForeignKey("debate.id"), nullable=True),
        sa.Column("task_type", _text(80), nullable=False),
        sa.Column("protocol", _text(40), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("components", sa.JSON(), nullable=True),
        sa.Column("weights_version", _text(40), nullable=True),
        sa.Column("sampled", sa.Boolean(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.CheckConstraint(f"kind IN ({kinds})", name="ck_calibration_label_kind"),
    )
    op.create_index("ix_calibration_label_kind", "calibration_label", ["kind"])
    op.create_index("ix_calibration_label_debate_id", "calibration_label", ["debate_id"])
    op.create_table(
        "confidence_weights",
        sa.Column("version", _text(40), primary_key=True),
        sa.Column("weights_json", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("proposed_at", WHEN, nullable=False),
    )
    op.create_table(
        "weights_adoption",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "version", _text(40), sa.ForeignKey("confidence_weights.version"), nullable=False
        ),
        sa.Column("adopted_by", _text(80), nullable=False),
        sa.Column("adopted_at", WHEN, nullable=False),
    )
    op.create_index("ix_weights_adoption_version", "weights_adoption", ["version"])


def downgrade() -> None:
    op.drop_index("ix_weights_adoption_version", table_name="weights_adoption")
    op.drop_table("weights_adoption")
    op.drop_table("confidence_weights")
    op.drop_index("ix_calibration_label_debate_id", table_name="calibration_label")
    op.drop_index("ix_calibration_label_kind", table_name="calibration_label")
    op.drop_table("calibration_label")
    with op.batch_alter_table("escalation") as batch:
        batch.drop_column("sample")
