"""Re-encrypt every stored Slack token with the first key of DEBATEBOT_TOKEN_ENCRYPTION_KEY, so
the older keys can be dropped from the setting without any workspace installing again."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, SQLModel, col, select

from bot.store.cipher import TokenCipher
from bot.store.installation_tables import SlackBot, SlackInstallation

BOT_COLUMNS = {"bot_token_enc": "bot_token", "bot_refresh_token_enc": "refresh_token"}
"""A bot row's sealed columns and the name each is sealed under (`bot.store.installations`)."""
INSTALLER_COLUMNS = {
    "user_token_enc": "user_token",
    "user_refresh_token_enc": "refresh_token",
    "incoming_webhook_url_enc": "incoming_webhook_url",
}
"""A person's install row's sealed columns and the name each is sealed under."""


@dataclass(frozen=True)
class Rekeyed:
    """What a rekey did: the values sealed again with the first key, those already under it."""

    resealed: int
    current: int


def rekey_tokens(session: Session, *, cipher: TokenCipher) -> Rekeyed:
    """Seal again with `cipher`'s first key every stored token another of its keys opens, in
    one transaction (committed): all of them or, when one opens with no key, none
    (TokenDecryptError names it)."""
    resealed = current = 0
    rows: list[tuple[SQLModel, str, dict[str, str]]] = [
        (bot, f"slack_bot:{bot.installation}", BOT_COLUMNS)
        for bot in session.exec(select(SlackBot).order_by(col(SlackBot.installation)))
    ]
    rows += [
        (row, f"slack_installation:{row.installation}:{row.user_id}", INSTALLER_COLUMNS)
        for row in session.exec(select(SlackInstallation).order_by(col(SlackInstallation.id)))
    ]
    for row, place, columns in rows:
        for column, name in columns.items():
            sealed = getattr(row, column)
            if sealed is None:
                continue
            where = f"{place}:{name}"
            plain, key = cipher.opened(sealed, where=where)
            if key == 0:
                current += 1
                continue
            setattr(row, column, cipher.seal(plain, where=where))
            session.add(row)
            resealed += 1
    session.commit()
    return Rekeyed(resealed=resealed, current=current)
