"""The tables of OAuth installs: each install's bot with its sealed tokens (`slack_bot`),
the people who installed (`slack_installation`), what happened to installs
(`installation_event`) and installs in progress (`oauth_state`)
(bot.store.installations)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.store.columns import enum_column
from engine.models import utcnow


class SlackBot(SQLModel, table=True):
    """The bot of one OAuth install: of a workspace, or of an Enterprise Grid org installed
    org-wide (no team). Installing again replaces it; token rotation rewrites its tokens. The
    tokens are sealed (bot.store.cipher), bound to this row's `installation` key."""

    __tablename__ = "slack_bot"

    installation: str = Field(primary_key=True, max_length=90)
    """`enterprise:team`, `-` for what there is none of (bot.store.installations.key)."""
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    is_enterprise_install: bool = Field(default=False)
    app_id: str | None = Field(default=None, max_length=40)
    enterprise_name: str | None = Field(default=None, max_length=200)
    team_name: str | None = Field(default=None, max_length=200)
    bot_id: str | None = Field(default=None, max_length=40)
    bot_user_id: str | None = Field(default=None, max_length=40)
    bot_scopes: str = Field(default="", sa_column=Column(Text, nullable=False))
    bot_token_enc: str = Field(sa_column=Column(Text, nullable=False))
    bot_refresh_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    bot_token_expires_at: datetime | None = None
    """When the bot token expires (token rotation on); None: it does not."""
    installed_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    refused_code: str | None = Field(default=None, max_length=60)
    """Slack refuses this bot token (`invalid_auth`, `account_inactive`, …) though no uninstall
    was heard of: no replica claims the workspace's debates or sends what it is owed until
    `auth.test` takes the token again or the app is installed again, which clears this
    (bot.store.refusals). None: the token is taken."""
    refused_scope: str | None = Field(default=None, max_length=200)
    """With `missing_scope`: the scope Slack named as needed."""
    refused_since: datetime | None = None
    probe_at: datetime | None = None
    """When a replica next asks Slack (`auth.test`) whether it takes the token."""
    probe_wait_s: float | None = None
    """The wait before the probe after that one (doubling up to a cap). Kept when a probe finds
    the token taken (`refused_code` None), until a delivery to the workspace proves it: a
    refusal meanwhile resumes from it (bot.store.refusals)."""


class SlackInstallation(SQLModel, table=True):
    """One person's install of the app in a workspace or org: who installed it and when, with
    their user token when the app asks for user scopes (sealed like the bot's). Installing again
    updates the person's row; the bot's token is in `slack_bot`."""

    __tablename__ = "slack_installation"
    __table_args__ = (
        UniqueConstraint("installation", "user_id", name="uq_slack_installation_user"),
    )

    id: int | None = Field(default=None, primary_key=True)
    installation: str = Field(max_length=90, index=True)
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    is_enterprise_install: bool = Field(default=False)
    app_id: str | None = Field(default=None, max_length=40)
    enterprise_name: str | None = Field(default=None, max_length=200)
    enterprise_url: str | None = Field(default=None, max_length=400)
    team_name: str | None = Field(default=None, max_length=200)
    user_id: str = Field(max_length=40)
    user_scopes: str = Field(default="", sa_column=Column(Text, nullable=False))
    user_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    user_refresh_token_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    user_token_expires_at: datetime | None = None
    incoming_webhook_url_enc: str | None = Field(
        default=None, sa_column=Column(Text, nullable=True)
    )
    incoming_webhook_channel: str | None = Field(default=None, max_length=200)
    incoming_webhook_channel_id: str | None = Field(default=None, max_length=40)
    incoming_webhook_configuration_url: str | None = Field(default=None, max_length=400)
    token_type: str | None = Field(default=None, max_length=40)
    installed_at: datetime = Field(default_factory=utcnow)


class InstallationEventKind(StrEnum):
    INSTALLED = "installed"
    """Through /slack/install (again: the same install, updated)."""
    TOKENS_REVOKED = "tokens_revoked"
    """Slack's `tokens_revoked`: the bot's token, or people's, no longer work."""
    UNINSTALLED = "uninstalled"
    """Slack's `app_uninstalled`: every token of the install is gone."""


class InstallationEvent(SQLModel, table=True):
    """What happened to an OAuth install and when: a record that stays when the tokens it
    speaks of are deleted."""

    __tablename__ = "installation_event"

    id: int | None = Field(default=None, primary_key=True)
    installation: str = Field(max_length=90, index=True)
    enterprise_id: str | None = Field(default=None, max_length=40)
    team_id: str | None = Field(default=None, max_length=40)
    kind: InstallationEventKind = Field(
        sa_column=enum_column(InstallationEventKind, name="ck_installation_event_kind", length=20)
    )
    bot: bool = Field(default=False)
    """The bot's token was installed, or revoked and deleted."""
    user_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    """Who installed, or whose user tokens were revoked."""
    event_id: str | None = Field(default=None, max_length=80, unique=True)
    """Slack's event id, so an event Slack delivers again is recorded once. Unique across the
    deployment: Slack makes an event id unique across all workspaces (bot.store.dedupe)."""
    suspended_debates: int = Field(default=0)
    """Uninstalled or the bot's token revoked: the workspace's unfinished debates it stopped."""
    dropped_messages: int = Field(default=0)
    """… and the messages owed to the workspace it dropped (kept as failed outbox rows, with
    the reason)."""
    created_at: datetime = Field(default_factory=utcnow)


class OAuthState(SQLModel, table=True):
    """An install in progress: the state parameter /slack/install handed out, kept as its
    SHA-256 (the row alone cannot finish someone's install), consumed once at the redirect."""

    __tablename__ = "oauth_state"

    digest: str = Field(primary_key=True, max_length=64)
    expires_at: datetime = Field(index=True)
