"""debate.cancelled_from may be 'mcp': a coding agent stopped the debate with the MCP server's
cancel_debate tool (bot.fronts.mcp)

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-02 01:45:00
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

# The values written out (a migration must not change when the code does), as 0028 left them.
BEFORE = ("slack_stop", "command", "cli", "terminal", "web")
AFTER = (*BEFORE, "mcp")


def _check(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("ck_debate_cancelled_from", type_="check")
        listed = ", ".join(f"'{value}'" for value in values)
        batch.create_check_constraint("ck_debate_cancelled_from", f"cancelled_from IN ({listed})")


def upgrade() -> None:
    _check(AFTER)


def downgrade() -> None:
    op.execute("UPDATE debate SET cancelled_from = 'cli' WHERE cancelled_from = 'mcp'")
    _check(BEFORE)
