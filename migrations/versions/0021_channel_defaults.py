"""channel_settings: rounds and threshold may be unset (NULL), meaning the deployment's
DEBATEBOT_ROUNDS and DEBATEBOT_ESCALATION_THRESHOLD. Until now every channel row held 1 and 0.6,
the columns' defaults, so the deployment's settings never reached a channel with a row; the
rows holding exactly those defaults are unset, since nothing tells a value someone chose from a
default written with another setting (1 and 0.6 are also the deployment defaults, so only a
deployment that changed its own and a channel that chose them on purpose see a difference).
How many rows were unset is logged, with what to set again (README, *Channel settings*).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 12:00:00
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")
"""Alembic's own logger (its "Running upgrade" lines)."""


def upgrade() -> None:
    with op.batch_alter_table("channel_settings") as batch:
        batch.alter_column("rounds", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("threshold", existing_type=sa.Float(), nullable=True)
    bind = op.get_bind()
    rounds = bind.execute(sa.text("UPDATE channel_settings SET rounds = NULL WHERE rounds = 1"))
    threshold = bind.execute(
        sa.text("UPDATE channel_settings SET threshold = NULL WHERE threshold = 0.6")
    )
    if rounds.rowcount or threshold.rowcount:
        # A warning, not alembic's INFO: `debatebot db upgrade` configures no logging, and
        # Python shows a warning all the same.
        log.warning(
            "0021: unset rounds = 1 in %d channel(s) and threshold = 0.6 in %d (the columns' old"
            " defaults): they now follow DEBATEBOT_ROUNDS and DEBATEBOT_ESCALATION_THRESHOLD. A"
            " channel that chose 1 round or 0.6 on purpose under other deployment settings must"
            " set it again (`/debate config set rounds 1`, `set threshold 0.6`)",
            rounds.rowcount,
            threshold.rowcount,
        )


def downgrade() -> None:
    op.execute("UPDATE channel_settings SET rounds = 1 WHERE rounds IS NULL")
    op.execute("UPDATE channel_settings SET threshold = 0.6 WHERE threshold IS NULL")
    with op.batch_alter_table("channel_settings") as batch:
        batch.alter_column("threshold", existing_type=sa.Float(), nullable=False)
        batch.alter_column("rounds", existing_type=sa.Integer(), nullable=False)
