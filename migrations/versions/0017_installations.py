"""installations: OAuth installs of the Slack app (each workspace's or org's bot, with its sealed
tokens; each installer), what happened to them (installed, tokens revoked, uninstalled), and the
state parameters of installs in progress

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

WHEN = sqlmodel.sql.sqltypes.UTCDateTime()
EVENT_KINDS = ("installed", "tokens_revoked", "uninstalled")
"""The values as they stand today, written out: a migration must not change when the code does."""


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "slack_bot",
        sa.Column("installation", _text(90), primary_key=True),
        sa.Column("enterprise_id", _text(40), nullable=True),
        sa.Column("team_id", _text(40), nullable=True),
        sa.Column("is_enterprise_install", sa.Boolean(), nullable=False),
        sa.Column("app_id", _text(40), nullable=True),
        sa.Column("enterprise_name", _text(200), nullable=True),
        sa.Column("team_name", _text(200), nullable=True),
        sa.Column("bot_id", _text(40), nullable=True),
        sa.Column("bot_user_id", _text(40), nullable=True),
        sa.Column("bot_scopes", sa.Text(), nullable=False),
        sa.Column("bot_token_enc", sa.Text(), nullable=False),
        sa.Column("bot_refresh_token_enc", sa.Text(), nullable=True),
        sa.Column("bot_token_expires_at", WHEN, nullable=True),
        sa.Column("installed_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
    )
    op.create_table(
        "slack_installation",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("installation", _text(90), nullable=False),
        sa.Column("enterprise_id", _text(40), nullable=True),
        sa.Column("team_id", _text(40), nullable=True),
        sa.Column("is_enterprise_install", sa.Boolean(), nullable=False),
        sa.Column("app_id", _text(40), nullable=True),
        sa.Column("enterprise_name", _text(200), nullable=True),
        sa.Column("enterprise_url", _text(400), nullable=True),
        sa.Column("team_name", _text(200), nullable=True),
        sa.Column("user_id", _text(40), nullable=False),
        sa.Column("user_scopes", sa.Text(), nullable=False),
        sa.Column("user_token_enc", sa.Text(), nullable=True),
        sa.Column("user_refresh_token_enc", sa.Text(), nullable=True),
        sa.Column("user_token_expires_at", WHEN, nullable=True),
        sa.Column("incoming_webhook_url_enc", sa.Text(), nullable=True),
        sa.Column("incoming_webhook_channel", _text(200), nullable=True),
        sa.Column("incoming_webhook_channel_id", _text(40), nullable=True),
        sa.Column("incoming_webhook_configuration_url", _text(400), nullable=True),
        sa.Column("token_type", _text(40), nullable=True),
        sa.Column("installed_at", WHEN, nullable=False),
        sa.UniqueConstraint("installation", "user_id", name="uq_slack_installation_user"),
    )
    op.create_index("ix_slack_installation_installation", "slack_installation", ["installation"])
    listed = ", ".join(f"'{kind}'" for kind in EVENT_KINDS)
    op.create_table(
        "installation_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("installation", _text(90), nullable=False),
        sa.Column("enterprise_id", _text(40), nullable=True),
        sa.Column("team_id", _text(40), nullable=True),
        sa.Column("kind", _text(20), nullable=False),
        sa.Column("bot", sa.Boolean(), nullable=False),
        sa.Column("user_ids", sa.JSON(), nullable=False),
        sa.Column("event_id", _text(80), nullable=True, unique=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.CheckConstraint(f"kind IN ({listed})", name="ck_installation_event_kind"),
    )
    op.create_index("ix_installation_event_installation", "installation_event", ["installation"])
    op.create_table(
        "oauth_state",
        sa.Column("digest", _text(64), primary_key=True),
        sa.Column("expires_at", WHEN, nullable=False),
    )
    op.create_index("ix_oauth_state_expires_at", "oauth_state", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_oauth_state_expires_at", table_name="oauth_state")
    op.drop_table("oauth_state")
    op.drop_index("ix_installation_event_installation", table_name="installation_event")
    op.drop_table("installation_event")
    op.drop_index("ix_slack_installation_installation", table_name="slack_installation")
    op.drop_table("slack_installation")
    op.drop_table("slack_bot")
