"""verdict: the version of the confidence weights that scored it, and its confidence components
(issue 36), kept beside the result document that also holds them, so calibration reads them
without it; older verdicts have neither

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("verdict") as batch:
        batch.add_column(
            sa.Column(
                "weights_version",
                sqlmodel.sql.sqltypes.AutoString(length=40),
                nullable=True,
            )
        )
        batch.add_column(sa.Column("components_json", sa.Text(), nullable=True))
        batch.create_index("ix_verdict_weights_version", ["weights_version"])


def downgrade() -> None:
    with op.batch_alter_table("verdict") as batch:
        batch.drop_index("ix_verdict_weights_version")
        batch.drop_column("components_json")
        batch.drop_column("weights_version")
