"""The Slack app's OAuth installs: each workspace's (or Enterprise Grid org's) bot and each
person who installed it, their tokens sealed with the deployment's key (bot.store.cipher); what
happened to installs; and the state parameters of installs in progress. Keyword-only, like the
rest of the store. Tokens come in and go out in the clear and are sealed and opened only here,
so none is written unsealed.

An install is keyed by its enterprise and team (`key`). slack_sdk's installation stores find an
org-wide install (`is_enterprise_install`) by its enterprise alone, with no team, and so does
this store (`lookup_key`); a request from one of the org's workspaces that does not say it
comes from an org-wide install still finds the org's bot when its workspace has none of its
own, since an org-wide install is installed in every workspace of the org.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.cipher import TokenCipher
from bot.store.installation_tables import (
    InstallationEvent,
    InstallationEventKind,
    OAuthState,
    SlackBot,
    SlackInstallation,
)
from bot.store.sql import insert_once, rows_changed
from engine.models import utcnow

R = TypeVar("R", SlackBot, SlackInstallation)
"""A stored install's row: the bot's, or a person's."""

NONE = "-"
"""The part of a key for an enterprise or team there is none of (Slack's ids never are `-`)."""


def key(*, enterprise_id: str | None, team_id: str | None) -> str:
    """The install's key: `E1:T1` (a workspace of an org), `-:T1` (a workspace on its own),
    `E1:-` (an org-wide install)."""
    return f"{enterprise_id or NONE}:{team_id or NONE}"


def lookup_key(
    *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
) -> str:
    """The key a request's ids are looked up by: slack_sdk's stores look an org-wide install
    (or a request that names no team) up by its enterprise alone."""
    if is_enterprise_install or team_id is None:
        team_id = None
    return key(enterprise_id=enterprise_id, team_id=team_id)


@dataclass(frozen=True, kw_only=True)
class InstallPlace:
    """Where an install is (a workspace, or an org for an org-wide install) and when it was
    made: what a bot and an installer have alike."""

    enterprise_id: str | None
    team_id: str | None
    is_enterprise_install: bool
    app_id: str | None = None
    enterprise_name: str | None = None
    team_name: str | None = None
    installed_at: datetime = field(default_factory=utcnow)

    @property
    def install_key(self) -> str:
        return key(enterprise_id=self.enterprise_id, team_id=self.team_id)

    def place_values(self) -> dict[str, Any]:
        """The place as the columns of the same names in either install table."""
        return {
            "enterprise_id": self.enterprise_id,
            "team_id": self.team_id,
            "is_enterprise_install": self.is_enterprise_install,
            "app_id": self.app_id,
            "enterprise_name": self.enterprise_name,
            "team_name": self.team_name,
            "installed_at": self.installed_at,
        }


@dataclass(frozen=True, kw_only=True)
class StoredBot(InstallPlace):
    """A workspace's or org's bot, its tokens in the clear."""

    bot_token: str = field(repr=False)
    bot_id: str | None = None
    bot_user_id: str | None = None
    bot_scopes: str = ""
    """Comma-separated, as Slack lists them."""
    bot_refresh_token: str | None = field(default=None, repr=False)
    bot_token_expires_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Installer(InstallPlace):
    """One person's install in a workspace or org: their user token (when the app asks for user
    scopes) and incoming webhook, in the clear."""

    user_id: str
    user_token: str | None = field(default=None, repr=False)
    user_scopes: str = ""
    user_refresh_token: str | None = field(default=None, repr=False)
    user_token_expires_at: datetime | None = None
    incoming_webhook_url: str | None = field(default=None, repr=False)
    incoming_webhook_channel: str | None = None
    incoming_webhook_channel_id: str | None = None
    incoming_webhook_configuration_url: str | None = None
    token_type: str | None = None
    enterprise_url: str | None = None


# --- saving ----------------------------------------------------------------------------------


def save_install(
    session: Session, *, installer: Installer, bot: StoredBot | None, cipher: TokenCipher
) -> None:
    """An install: the person's row and, when the install has a bot token, the bot's, in one
    transaction. Installing again updates both (the person's row is theirs per install)."""

    def write() -> None:
        _put_installer(session, installer, cipher)
        if bot is not None:
            _put_bot(session, bot, cipher)

    _commit(session, write)


def save_bot(session: Session, *, bot: StoredBot, cipher: TokenCipher) -> None:
    """The bot alone: a rotated token, or an install seen only as its bot."""
    _commit(session, lambda: _put_bot(session, bot, cipher))


def _commit(session: Session, write: Callable[[], None]) -> None:
    """Run `write` and commit; when another process inserted the same row in between (two
    replicas saving one install), once more, which then updates it: the last save wins."""
    write()
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        write()
        session.commit()


def _put_bot(session: Session, bot: StoredBot, cipher: TokenCipher) -> None:
    where = f"slack_bot:{bot.install_key}"
    values: dict[str, Any] = bot.place_values() | {
        "bot_id": bot.bot_id,
        "bot_user_id": bot.bot_user_id,
        "bot_scopes": bot.bot_scopes,
        "bot_token_enc": cipher.seal(bot.bot_token, where=f"{where}:bot_token"),
        "bot_refresh_token_enc": _seal(cipher, bot.bot_refresh_token, f"{where}:refresh_token"),
        "bot_token_expires_at": bot.bot_token_expires_at,
        "updated_at": utcnow(),
    }
    _update_or_add(
        session,
        session.get(SlackBot, bot.install_key),
        values,
        lambda: SlackBot(installation=bot.install_key, **values),
    )


def _put_installer(session: Session, installer: Installer, cipher: TokenCipher) -> None:
    where = f"slack_installation:{installer.install_key}:{installer.user_id}"
    values: dict[str, Any] = installer.place_values() | {
        "enterprise_url": installer.enterprise_url,
        "user_scopes": installer.user_scopes,
        "user_token_enc": _seal(cipher, installer.user_token, f"{where}:user_token"),
        "user_refresh_token_enc": _seal(
            cipher, installer.user_refresh_token, f"{where}:refresh_token"
        ),
        "user_token_expires_at": installer.user_token_expires_at,
        "incoming_webhook_url_enc": _seal(
            cipher, installer.incoming_webhook_url, f"{where}:incoming_webhook_url"
        ),
        "incoming_webhook_channel": installer.incoming_webhook_channel,
        "incoming_webhook_channel_id": installer.incoming_webhook_channel_id,
        "incoming_webhook_configuration_url": installer.incoming_webhook_configuration_url,
        "token_type": installer.token_type,
    }
    row = session.exec(
        select(SlackInstallation).where(
            col(SlackInstallation.installation) == installer.install_key,
            col(SlackInstallation.user_id) == installer.user_id,
        )
    ).first()
    _update_or_add(
        session,
        row,
        values,
        lambda: SlackInstallation(
            installation=installer.install_key, user_id=installer.user_id, **values
        ),
    )


def _update_or_add(
    session: Session, row: R | None, values: dict[str, Any], new: Callable[[], R]
) -> None:
    """Write `values` over the stored `row`, or add the row `new` makes when none is stored."""
    if row is None:
        session.add(new())
        return
    for name, value in values.items():
        setattr(row, name, value)
    session.add(row)


def _seal(cipher: TokenCipher, value: str | None, where: str) -> str | None:
    return None if value is None else cipher.seal(value, where=where)


def _open(cipher: TokenCipher, value: str | None, where: str) -> str | None:
    return None if value is None else cipher.open(value, where=where)


# --- finding ---------------------------------------------------------------------------------


def find_bot(
    session: Session,
    *,
    enterprise_id: str | None,
    team_id: str | None,
    is_enterprise_install: bool | None,
    cipher: TokenCipher,
) -> StoredBot | None:
    """The bot a request from these ids acts with (see the module's docstring); None when the
    app is not installed there, or its bot's token was revoked."""
    row = bot_row(
        session,
        enterprise_id=enterprise_id,
        team_id=team_id,
        is_enterprise_install=is_enterprise_install,
    )
    return None if row is None else _bot(row, cipher)


def bot_row(
    session: Session,
    *,
    enterprise_id: str | None,
    team_id: str | None,
    is_enterprise_install: bool | None,
) -> SlackBot | None:
    """The stored row of the bot `find_bot` answers for these ids, its tokens still sealed."""
    lookup = lookup_key(
        enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
    )
    return _own_or_the_orgs(lambda at: session.get(SlackBot, at), lookup, enterprise_id)


def find_installer(
    session: Session,
    *,
    enterprise_id: str | None,
    team_id: str | None,
    user_id: str | None,
    is_enterprise_install: bool | None,
    cipher: TokenCipher,
) -> Installer | None:
    """`user_id`'s install there, or with no user the latest install there (slack_sdk's
    `find_installation` without a user)."""
    lookup = lookup_key(
        enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
    )
    row = _own_or_the_orgs(
        lambda at: _latest_installer(session, at, user_id), lookup, enterprise_id
    )
    return None if row is None else _installer(row, cipher)


def _own_or_the_orgs(
    find: Callable[[str], R | None], lookup: str, enterprise_id: str | None
) -> R | None:
    """The row `find` finds under `lookup`; when there is none and the ids name an org, the
    org's row if it is an org-wide install (installed in every workspace of the org)."""
    row = find(lookup)
    if row is None and enterprise_id is not None and lookup != _org(enterprise_id):
        org = find(_org(enterprise_id))
        row = org if org is not None and org.is_enterprise_install else None
    return row


def _org(enterprise_id: str) -> str:
    return key(enterprise_id=enterprise_id, team_id=None)


def _latest_installer(
    session: Session, lookup: str, user_id: str | None
) -> SlackInstallation | None:
    query = select(SlackInstallation).where(col(SlackInstallation.installation) == lookup)
    if user_id is not None:
        query = query.where(col(SlackInstallation.user_id) == user_id)
    query = query.order_by(
        col(SlackInstallation.installed_at).desc(), col(SlackInstallation.id).desc()
    )
    return session.exec(query.limit(1)).first()


def _bot(row: SlackBot, cipher: TokenCipher) -> StoredBot:
    where = f"slack_bot:{row.installation}"
    return StoredBot(
        enterprise_id=row.enterprise_id,
        team_id=row.team_id,
        is_enterprise_install=row.is_enterprise_install,
        app_id=row.app_id,
        enterprise_name=row.enterprise_name,
        team_name=row.team_name,
        bot_id=row.bot_id,
        bot_user_id=row.bot_user_id,
        bot_scopes=row.bot_scopes,
        bot_token=cipher.open(row.bot_token_enc, where=f"{where}:bot_token"),
        bot_refresh_token=_open(cipher, row.bot_refresh_token_enc, f"{where}:refresh_token"),
        bot_token_expires_at=row.bot_token_expires_at,
        installed_at=row.installed_at,
    )


def _installer(row: SlackInstallation, cipher: TokenCipher) -> Installer:
    where = f"slack_installation:{row.installation}:{row.user_id}"
    return Installer(
        enterprise_id=row.enterprise_id,
        team_id=row.team_id,
        is_enterprise_install=row.is_enterprise_install,
        app_id=row.app_id,
        enterprise_name=row.enterprise_name,
        enterprise_url=row.enterprise_url,
        team_name=row.team_name,
        user_id=row.user_id,
        user_scopes=row.user_scopes,
        user_token=_open(cipher, row.user_token_enc, f"{where}:user_token"),
        user_refresh_token=_open(cipher, row.user_refresh_token_enc, f"{where}:refresh_token"),
        user_token_expires_at=row.user_token_expires_at,
        incoming_webhook_url=_open(
            cipher, row.incoming_webhook_url_enc, f"{where}:incoming_webhook_url"
        ),
        incoming_webhook_channel=row.incoming_webhook_channel,
        incoming_webhook_channel_id=row.incoming_webhook_channel_id,
        incoming_webhook_configuration_url=row.incoming_webhook_configuration_url,
        token_type=row.token_type,
        installed_at=row.installed_at,
    )


def check_key(session: Session, *, cipher: TokenCipher) -> None:
    """TokenDecryptError when the newest stored bot token does not open with `cipher`: the
    deployment's key is not the one its installs were stored with (nothing stored: fine)."""
    row = session.exec(select(SlackBot).order_by(col(SlackBot.updated_at).desc()).limit(1)).first()
    if row is not None:
        _bot(row, cipher)


# --- deleting --------------------------------------------------------------------------------


def delete_bot(session: Session, *, enterprise_id: str | None, team_id: str | None) -> int:
    """Delete the bot of exactly these ids (an org-wide install: no team); how many rows went."""
    gone = session.execute(
        delete(SlackBot).where(
            col(SlackBot.installation) == key(enterprise_id=enterprise_id, team_id=team_id)
        )
    )
    session.commit()
    return rows_changed(gone)


def delete_installers(
    session: Session, *, enterprise_id: str | None, team_id: str | None, user_id: str | None
) -> int:
    """Delete `user_id`'s install of exactly these ids, or with no user every person's."""
    statement = delete(SlackInstallation).where(
        col(SlackInstallation.installation) == key(enterprise_id=enterprise_id, team_id=team_id)
    )
    if user_id is not None:
        statement = statement.where(col(SlackInstallation.user_id) == user_id)
    gone = session.execute(statement)
    session.commit()
    return rows_changed(gone)


def delete_install(session: Session, *, enterprise_id: str | None, team_id: str | None) -> int:
    """Delete the bot and every person's install of exactly these ids, in one transaction."""
    where = key(enterprise_id=enterprise_id, team_id=team_id)
    bots = session.execute(delete(SlackBot).where(col(SlackBot.installation) == where))
    people = session.execute(
        delete(SlackInstallation).where(col(SlackInstallation.installation) == where)
    )
    session.commit()
    return rows_changed(bots) + rows_changed(people)


# --- what happened ---------------------------------------------------------------------------


def record_event(
    session: Session,
    *,
    enterprise_id: str | None,
    team_id: str | None,
    kind: InstallationEventKind,
    bot: bool,
    user_ids: Sequence[str] = (),
    event_id: str | None = None,
    suspended_debates: int = 0,
    dropped_messages: int = 0,
) -> bool:
    """Record what happened to an install (with, for an uninstall or a revoked bot token, how
    many debates it suspended and owed messages it dropped); False when Slack's event
    `event_id` was recorded already (a redelivery)."""
    return insert_once(
        session,
        InstallationEvent(
            installation=key(enterprise_id=enterprise_id, team_id=team_id),
            enterprise_id=enterprise_id,
            team_id=team_id,
            kind=kind,
            bot=bot,
            user_ids=list(user_ids),
            event_id=event_id,
            suspended_debates=suspended_debates,
            dropped_messages=dropped_messages,
        ),
    )


def events(
    session: Session, *, enterprise_id: str | None, team_id: str | None
) -> list[InstallationEvent]:
    """What happened to the install of exactly these ids, oldest first."""
    return list(
        session.exec(
            select(InstallationEvent)
            .where(
                col(InstallationEvent.installation)
                == key(enterprise_id=enterprise_id, team_id=team_id)
            )
            .order_by(col(InstallationEvent.id))
        )
    )


# --- installs in progress --------------------------------------------------------------------


def issue_state(session: Session, *, digest: str, expires_at: datetime) -> None:
    """Keep a new install's state (its digest) until `expires_at`; states that expired unused
    (an install abandoned halfway) are deleted on the way."""
    session.execute(delete(OAuthState).where(col(OAuthState.expires_at) <= utcnow()))
    session.add(OAuthState(digest=digest, expires_at=expires_at))
    session.commit()


def consume_state(session: Session, *, digest: str) -> bool:
    """Whether the state is one this deployment issued and has not expired, using it up in the
    statement that checks it, so two redirects with one state (a replay, a double click) cannot
    both pass, whichever replica each reaches."""
    gone = session.execute(
        delete(OAuthState).where(
            col(OAuthState.digest) == digest, col(OAuthState.expires_at) > utcnow()
        )
    )
    session.commit()
    return rows_changed(gone) == 1
