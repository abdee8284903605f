"""typed states: every column that holds one of a fixed set of values (a debate's source,
state, outcome, decision and triage; a verdict's status, decision and level; an escalation's
state, a review's decision, a feedback's value; an outbox row's action, target, fallback and
state; a scheduled run's outcome) gets a CHECK constraint naming the values it may hold

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 16:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
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
STATUSES = ("COMPLETE", "TRUNCATED_BUDGET", "FAILED")
DECISIONS = ("accept", "accept_with_conditions", "revise", "reject", "escalate")
ESCALATION_STATES = ("open", "approved", "rejected", "another_round", "expired")
OUTBOX_STATES = ("pending", "sending", "sent", "failed", "split")
CHECKS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "debate": [
        ("ck_debate_source", "source", SOURCES),
        ("ck_debate_state", "state", ("queued", "running", "finished")),
        ("ck_debate_outcome", "outcome", STATUSES),
        ("ck_debate_decision", "decision", DECISIONS),
        ("ck_debate_triage", "triage", ("pending", "debate", "answered")),
    ],
    "verdict": [
        ("ck_verdict_status", "status", STATUSES),
        ("ck_verdict_decision", "decision", DECISIONS),
        ("ck_verdict_level", "level", ("HIGH", "MODERATE", "LOW")),
    ],
    "escalation": [("ck_escalation_state", "state", ESCALATION_STATES)],
    "review": [("ck_review_decision", "decision", ESCALATION_STATES)],
    "feedback": [("ck_feedback_value", "value", ("positive", "negative"))],
    "outbox": [
        ("ck_outbox_action", "action", ("post", "update")),
        ("ck_outbox_target", "target", ("thread", "channel", "dm")),
        ("ck_outbox_fallback", "fallback", ("none", "reviewers")),
        ("ck_outbox_state", "state", OUTBOX_STATES),
    ],
    "scheduled_run": [("ck_scheduled_run_outcome", "outcome", ("running", "ok", "failed"))],
}


def upgrade() -> None:
    for table, checks in CHECKS.items():
        with op.batch_alter_table(table) as batch:
            for name, column, values in checks:
                listed = ", ".join(f"'{value}'" for value in values)
                batch.create_check_constraint(name, f"{column} IN ({listed})")


def downgrade() -> None:
    for table, checks in CHECKS.items():
        with op.batch_alter_table(table) as batch:
            for name, _column, _values in checks:
                batch.drop_constraint(name, type_="check")
