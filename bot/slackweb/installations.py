"""slack_sdk's installation and OAuth state stores on the bot's own database
(bot.store.installations, migrated by alembic like every other table).

The stores implement what Bolt's OAuth flow and slack_sdk document for an
`AsyncInstallationStore` (save, find_bot, find_installation, delete_bot, delete_installation,
delete_all) and an `AsyncOAuthStateStore` (issue, consume). slack_sdk's own SQLAlchemy stores
would create their tables outside the migrations, and keep tokens in the clear.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from logging import Logger
from typing import Any

from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from sqlalchemy import Engine
from sqlmodel import Session

from bot.store import installations, refusals
from bot.store.cipher import TokenCipher
from bot.store.db import in_session
from bot.store.installations import Installer, StoredBot
from bot.store.tenancy import EVERY_WORKSPACE

log = logging.getLogger(__name__)

STATE_EXPIRES_S = 600
"""How long an install may take from /slack/install to the redirect: Bolt's default, and the
10 minutes Slack's authorization code itself lives."""


class DatabaseInstallationStore(AsyncInstallationStore):
    """Installs on the bot's database, tokens sealed with `cipher`. Follows slack_sdk's
    semantics: an org-wide install (`is_enterprise_install`) is found by its enterprise with no
    team; without a user, `find_installation` answers the latest install in the workspace, with
    the workspace's current bot token; deleting names exact ids (an org-wide install: no
    team). Saving a bot's new tokens (an install again, a renewal) clears a refusal of its old
    ones (bot.store.refusals)."""

    def __init__(self, *, engine: Engine, cipher: TokenCipher) -> None:
        self.engine = engine
        self.cipher = cipher

    @property
    def logger(self) -> Logger:
        return log

    async def async_save(self, installation: Installation) -> None:
        installer = _installer(installation)
        bot = _bot_of(installation)

        def save(session: Session) -> None:
            installations.save_install(session, installer=installer, bot=bot, cipher=self.cipher)
            if bot is not None:
                # New tokens are worth trying, whatever Slack answered the old ones.
                refusals.accept(session, installation=bot.install_key, new_tokens=True)

        await in_session(self.engine, save, workspace=EVERY_WORKSPACE)

    async def async_save_bot(self, bot: Bot) -> None:
        stored = _stored(bot)

        def save(session: Session) -> None:
            installations.save_bot(session, bot=stored, cipher=self.cipher)
            refusals.accept(session, installation=stored.install_key, new_tokens=True)

        await in_session(self.engine, save, workspace=EVERY_WORKSPACE)

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        found = await in_session(
            self.engine,
            lambda s: installations.find_bot(
                s,
                enterprise_id=enterprise_id,
                team_id=team_id,
                is_enterprise_install=is_enterprise_install,
                cipher=self.cipher,
            ),
            workspace=EVERY_WORKSPACE,
        )
        return None if found is None else _sdk_bot(found)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        def find(session: Session) -> tuple[Installer | None, StoredBot | None]:
            installer = installations.find_installer(
                session,
                enterprise_id=enterprise_id,
                team_id=team_id,
                user_id=user_id,
                is_enterprise_install=is_enterprise_install,
                cipher=self.cipher,
            )
            if installer is None:
                return None, None
            # The install's current bot, whoever installed it last (slack_sdk substitutes the
            # latest bot's token into a person's older install the same way).
            bot = installations.find_bot(
                session,
                enterprise_id=installer.enterprise_id,
                team_id=installer.team_id,
                is_enterprise_install=installer.is_enterprise_install,
                cipher=self.cipher,
            )
            return installer, bot

        installer, bot = await in_session(self.engine, find, workspace=EVERY_WORKSPACE)
        return None if installer is None else _installation(installer, bot)

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await in_session(
            self.engine,
            lambda s: installations.delete_bot(s, enterprise_id=enterprise_id, team_id=team_id),
            workspace=EVERY_WORKSPACE,
        )

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        await in_session(
            self.engine,
            lambda s: installations.delete_installers(
                s, enterprise_id=enterprise_id, team_id=team_id, user_id=user_id
            ),
            workspace=EVERY_WORKSPACE,
        )

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await in_session(
            self.engine,
            lambda s: installations.delete_install(s, enterprise_id=enterprise_id, team_id=team_id),
            workspace=EVERY_WORKSPACE,
        )


class DatabaseStateStore(AsyncOAuthStateStore):
    """The state parameter of installs in progress (OAuth's defence against a forged redirect):
    random, kept as its SHA-256 until it expires, consumed once, on whichever replica the
    redirect reaches."""

    def __init__(self, *, engine: Engine, expiration_seconds: int = STATE_EXPIRES_S) -> None:
        self.engine = engine
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> Logger:
        return log

    async def async_issue(self, *args: object, **kwargs: object) -> str:
        state = secrets.token_urlsafe(32)
        expires_at = datetime.now(UTC) + timedelta(seconds=self.expiration_seconds)
        await in_session(
            self.engine,
            lambda s: installations.issue_state(s, digest=_digest(state), expires_at=expires_at),
            workspace=EVERY_WORKSPACE,
        )
        return state

    async def async_consume(self, state: str) -> bool:
        return await in_session(
            self.engine,
            lambda s: installations.consume_state(s, digest=_digest(state)),
            workspace=EVERY_WORKSPACE,
        )


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


# --- between slack_sdk's models and the store's values -------------------------------------


def _when(value: float | int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _scopes(scopes: str | Sequence[str] | None) -> str:
    """Slack's comma-separated list (slack_sdk's models hold a list once built)."""
    if isinstance(scopes, str):
        return scopes
    return ",".join(scopes or ())


def _place(install: Installation | Bot) -> dict[str, Any]:
    """Where slack_sdk's install or bot is, as `InstallPlace` holds it."""
    org = install.is_enterprise_install
    return {
        "enterprise_id": install.enterprise_id,
        # An org-wide install is the org's, whatever workspace the installer was in.
        "team_id": None if org else install.team_id,
        "is_enterprise_install": org,
        "app_id": install.app_id,
        "enterprise_name": install.enterprise_name,
        "team_name": install.team_name,
        "installed_at": datetime.fromtimestamp(install.installed_at, UTC),
    }


def _installer(installation: Installation) -> Installer:
    return Installer(
        **_place(installation),
        user_id=installation.user_id,
        user_token=installation.user_token,
        user_scopes=_scopes(installation.user_scopes),
        user_refresh_token=installation.user_refresh_token,
        user_token_expires_at=_when(installation.user_token_expires_at),
        incoming_webhook_url=installation.incoming_webhook_url,
        incoming_webhook_channel=installation.incoming_webhook_channel,
        incoming_webhook_channel_id=installation.incoming_webhook_channel_id,
        incoming_webhook_configuration_url=installation.incoming_webhook_configuration_url,
        token_type=installation.token_type,
        enterprise_url=installation.enterprise_url,
    )


def _bot_of(installation: Installation) -> StoredBot | None:
    if installation.bot_token is None:
        return None
    return _stored(installation.to_bot())


def _stored(bot: Bot) -> StoredBot:
    return StoredBot(
        **_place(bot),
        bot_token=bot.bot_token,
        bot_id=bot.bot_id,
        bot_user_id=bot.bot_user_id,
        bot_scopes=_scopes(bot.bot_scopes),
        bot_refresh_token=bot.bot_refresh_token,
        bot_token_expires_at=_when(bot.bot_token_expires_at),
    )


def _sdk_bot(bot: StoredBot) -> Bot:
    return Bot(
        app_id=bot.app_id,
        enterprise_id=bot.enterprise_id,
        enterprise_name=bot.enterprise_name,
        team_id=bot.team_id,
        team_name=bot.team_name,
        bot_token=bot.bot_token,
        bot_id=bot.bot_id or "",
        bot_user_id=bot.bot_user_id or "",
        bot_scopes=bot.bot_scopes,
        bot_refresh_token=bot.bot_refresh_token,
        bot_token_expires_at=bot.bot_token_expires_at,
        is_enterprise_install=bot.is_enterprise_install,
        installed_at=bot.installed_at,
    )


def _installation(installer: Installer, bot: StoredBot | None) -> Installation:
    return Installation(
        app_id=installer.app_id,
        enterprise_id=installer.enterprise_id,
        enterprise_name=installer.enterprise_name,
        enterprise_url=installer.enterprise_url,
        team_id=installer.team_id,
        team_name=installer.team_name,
        bot_token=bot.bot_token if bot else None,
        bot_id=bot.bot_id if bot else None,
        bot_user_id=bot.bot_user_id if bot else None,
        bot_scopes=bot.bot_scopes if bot else "",
        bot_refresh_token=bot.bot_refresh_token if bot else None,
        bot_token_expires_at=bot.bot_token_expires_at if bot else None,
        user_id=installer.user_id,
        user_token=installer.user_token,
        user_scopes=installer.user_scopes,
        user_refresh_token=installer.user_refresh_token,
        user_token_expires_at=installer.user_token_expires_at,
        incoming_webhook_url=installer.incoming_webhook_url,
        incoming_webhook_channel=installer.incoming_webhook_channel,
        incoming_webhook_channel_id=installer.incoming_webhook_channel_id,
        incoming_webhook_configuration_url=installer.incoming_webhook_configuration_url,
        is_enterprise_install=installer.is_enterprise_install,
        token_type=installer.token_type,
        installed_at=installer.installed_at,
    )
