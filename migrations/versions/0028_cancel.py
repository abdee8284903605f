"""debate: who stopped a debate, when and from where (cancel_requested_at, cancelled_by,
cancelled_from); the CANCELLED outcome in debate.outcome and verdict.status (issue 44)

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-03 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

STATUSES = ("COMPLETE", "TRUNCATED_BUDGET", "FAILED")
WITH_CANCELLED = (*STATUSES, "CANCELLED")
SOURCES = ("slack_stop", "command", "cli", "terminal", "web")
OUTCOMES = (("debate", "ck_debate_outcome", "outcome"), ("verdict", "ck_verdict_status", "status"))


def _listed(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def upgrade() -> None:
    for table, name, column in OUTCOMES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, f"{column} IN ({_listed(WITH_CANCELLED)})")
    with op.batch_alter_table("debate") as batch:
        batch.add_column(
            sa.Column("cancel_requested_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
        batch.add_column(
            sa.Column("cancelled_by", sqlmodel.sql.sqltypes.AutoString(length=80), nullable=True)
        )
        batch.add_column(sa.Column("cancelled_from", sa.String(length=20), nullable=True))
        batch.create_check_constraint(
            "ck_debate_cancelled_from", f"cancelled_from IN ({_listed(SOURCES)})"
        )


def downgrade() -> None:
    op.execute("UPDATE verdict SET status = 'FAILED' WHERE status = 'CANCELLED'")
    op.execute("UPDATE debate SET outcome = 'FAILED' WHERE outcome = 'CANCELLED'")
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("ck_debate_cancelled_from", type_="check")
        batch.drop_column("cancelled_from")
        batch.drop_column("cancelled_by")
        batch.drop_column("cancel_requested_at")
    for table, name, column in OUTCOMES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, f"{column} IN ({_listed(STATUSES)})")
