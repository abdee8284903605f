"""debate.source may be 'mcp': a debate a coding agent asked for over MCP (bot.fronts.mcp)

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

# The values written out (a migration must not change when the code does), as 0029 left them.
BEFORE = (
    "command",
    "modal",
    "adr",
    "upload",
    "link",
    "reaction",
    "shortcut",
    "another_round",
    "debate_anyway",
    "assistant",
    "cli",
    "web",
    "api",
)
AFTER = (*BEFORE, "mcp")


def _check(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("ck_debate_source", type_="check")
        listed = ", ".join(f"'{value}'" for value in values)
        batch.create_check_constraint("ck_debate_source", f"source IN ({listed})")


def upgrade() -> None:
    _check(AFTER)


def downgrade() -> None:
    op.execute("UPDATE debate SET source = 'cli' WHERE source = 'mcp'")
    _check(BEFORE)
