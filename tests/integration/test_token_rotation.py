"""Rotating DEBATEBOT_TOKEN_ENCRYPTION_KEY with workspaces installed, on SQLite and PostgreSQL:
with the new key first and the old one after it every stored token still opens (no workspace
installs again), `debatebot workspace rekey` seals every token again with the new key (all or
none), and then the new key alone opens them all."""

from __future__ import annotations

import pytest
from slack_sdk.oauth.installation_store import Installation
from sqlalchemy import Engine
from sqlmodel import col, select

from bot.cli import main
from bot.slackweb.installations import DatabaseInstallationStore
from bot.store.cipher import TokenCipher
from bot.store.db import session_scope
from bot.store.errors import TokenDecryptError
from bot.store.installation_tables import SlackBot
from bot.store.rekey import rekey_tokens
from bot.store.tenancy import EVERY_WORKSPACE

OLD, NEW, OTHER = "o" * 40, "n" * 40, "z" * 40
TEAMS = ("T1", "T2", "T3")


async def installed(store: Engine, key: str) -> None:
    """Three workspaces installed with `key`, each with a bot token, a refresh token, a user
    token and an incoming webhook."""
    stores = DatabaseInstallationStore(engine=store, cipher=TokenCipher(key.encode()))
    for team in TEAMS:
        await stores.async_save(
            Installation(
                app_id="A1",
                team_id=team,
                bot_token=f"xoxb-{team}-secret",
                bot_refresh_token=f"xoxe-{team}-refresh",
                bot_token_expires_in=43_200,
                bot_id="B1",
                bot_user_id="UBOT",
                user_id="UINSTALLER",
                user_token=f"xoxp-{team}-user",
                incoming_webhook_url=f"https://hooks.slack.com/services/{team}/B1/secret",
            )
        )


async def tokens(store: Engine, cipher: TokenCipher) -> list[tuple[str | None, ...]]:
    stores = DatabaseInstallationStore(engine=store, cipher=cipher)
    found: list[tuple[str | None, ...]] = []
    for team in TEAMS:
        install = await stores.async_find_installation(enterprise_id=None, team_id=team)
        assert install is not None
        found.append(
            (
                install.bot_token,
                install.bot_refresh_token,
                install.user_token,
                install.incoming_webhook_url,
            )
        )
    return found


async def test_a_rotated_key_opens_old_tokens_and_rekey_moves_them_to_the_new_key(
    store: Engine,
) -> None:
    await installed(store, OLD)
    before = await tokens(store, TokenCipher(OLD.encode()))
    rotating = TokenCipher(NEW.encode(), OLD.encode())
    assert await tokens(store, rotating) == before
    with pytest.raises(TokenDecryptError):
        await tokens(store, TokenCipher(NEW.encode()))
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        done = rekey_tokens(session, cipher=rotating)
    # Per workspace: the bot's token and refresh token; the installer's user token and webhook.
    assert (done.resealed, done.current) == (4 * len(TEAMS), 0)
    assert await tokens(store, TokenCipher(NEW.encode())) == before
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        again = rekey_tokens(session, cipher=rotating)
    assert (again.resealed, again.current) == (0, 4 * len(TEAMS))


async def test_rekey_changes_nothing_when_one_token_opens_with_no_key(store: Engine) -> None:
    await installed(store, OLD)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        stray = session.exec(select(SlackBot).order_by(col(SlackBot.installation))).all()[-1]
        stray.bot_token_enc = TokenCipher(OTHER.encode()).seal(
            "xoxb-x", where=f"slack_bot:{stray.installation}:bot_token"
        )
        session.add(stray)
        session.commit()
        with pytest.raises(TokenDecryptError, match="does not decrypt"):
            rekey_tokens(session, cipher=TokenCipher(NEW.encode(), OLD.encode()))
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        first = session.exec(select(SlackBot).order_by(col(SlackBot.installation))).all()[0]
        opened = TokenCipher(OLD.encode()).open(
            first.bot_token_enc, where=f"slack_bot:{first.installation}:bot_token"
        )
    assert opened == "xoxb-T1-secret", "rolled back: still sealed with the old key"


async def test_the_rekey_command_re_encrypts_with_the_first_key(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await installed(store, OLD)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    monkeypatch.setenv("DEBATEBOT_SLACK_CLIENT_ID", "1234567890.0987654321")
    monkeypatch.setenv("DEBATEBOT_SLACK_CLIENT_SECRET", "c" * 32)
    monkeypatch.setenv("DEBATEBOT_SLACK_SIGNING_SECRET", "s" * 32)
    monkeypatch.setenv("DEBATEBOT_TOKEN_ENCRYPTION_KEY", f"{NEW},{OLD}")
    assert main(["workspace", "rekey"]) == 0
    assert "re-encrypted 12 stored token(s) with the first key" in capsys.readouterr().out
    assert len(await tokens(store, TokenCipher(NEW.encode()))) == len(TEAMS)
    monkeypatch.setenv("DEBATEBOT_TOKEN_ENCRYPTION_KEY", OTHER)
    assert main(["workspace", "rekey"]) == 1
    assert "nothing was re-encrypted" in capsys.readouterr().err
