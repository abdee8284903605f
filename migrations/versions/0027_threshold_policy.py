"""threshold_adoption: a workspace's choice of escalation threshold (guaranteed, recommended or
fixed) made with a weights adoption, none at first; calibration_label.threshold: the escalation
threshold a labelled verdict was decided under (NULL for the labels made before)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-02 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

WHEN = sqlmodel.sql.sqltypes.UTCDateTime()


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "threshold_adoption",
        sa.Column("team_id", _text(40), nullable=False),
        sa.Column("enterprise_id", _text(40), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "source",
            sa.Enum(
                "channel",
                "guaranteed",
                "recommended",
                "fixed",
                name="ck_threshold_adoption_source",
                native_enum=False,
                create_constraint=True,
                length=20,
            ),
            nullable=False,
        ),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("version", _text(40), nullable=True),
        sa.Column("adopted_by", _text(80), nullable=False),
        sa.Column("adopted_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_threshold_adoption_team_id", "threshold_adoption", ["team_id"])
    with op.batch_alter_table("calibration_label") as batch:
        batch.add_column(sa.Column("threshold", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("calibration_label") as batch:
        batch.drop_column("threshold")
    op.drop_index("ix_threshold_adoption_team_id", table_name="threshold_adoption")
    op.drop_table("threshold_adoption")
