"""web source: a debate may be asked from the web page (`web`) or the HTTP API (`api`) of
`debatebot web`, beside Slack's triggers and the terminal

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0029"
# Written on a branch from 0025, beside 0026_post_in_doubt and 0027_threshold_policy: merged
# after them, this follows 0027 (it changes nothing they change).
down_revision = "0028"
branch_labels = None
depends_on = None

# The values as they stand today, written out: a migration must not change when the code does.
SOURCES = (
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
)
SOURCES_WITH_WEB = (*SOURCES, "web", "api")


def _listed(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def upgrade() -> None:
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("ck_debate_source", type_="check")
        batch.create_check_constraint(
            "ck_debate_source", f"source IN ({_listed(SOURCES_WITH_WEB)})"
        )


def downgrade() -> None:
    # The code before this revision cannot read a debate asked from the web: say so by keeping
    # it as the terminal's (both ran outside Slack and owe no messages).
    op.execute("UPDATE debate SET source = 'cli' WHERE source IN ('web', 'api')")
    with op.batch_alter_table("debate") as batch:
        batch.drop_constraint("ck_debate_source", type_="check")
        batch.create_check_constraint("ck_debate_source", f"source IN ({_listed(SOURCES)})")
