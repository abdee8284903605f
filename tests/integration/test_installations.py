"""The installation and OAuth state stores on SQLite and PostgreSQL, as slack_sdk documents
their semantics: save and find an install and its bot, install again over it, find an org-wide
install from any workspace of its org, delete a bot, a person's install or all of an install,
and a state that passes once and only before it expires. Tokens are sealed in the rows, and a
sealed token moved to another row does not open."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.oauth.installation_store import Bot, Installation
from sqlalchemy import Engine, update
from sqlmodel import col, select

from bot.slackweb.installations import DatabaseInstallationStore, DatabaseStateStore
from bot.store import installations
from bot.store.cipher import TokenCipher
from bot.store.db import session_scope
from bot.store.errors import TokenDecryptError
from bot.store.installation_tables import (
    InstallationEventKind,
    OAuthState,
    SlackBot,
    SlackInstallation,
)
from bot.store.tenancy import PENDING_WORKSPACE

KEY = b"5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d5a4b3c2d"


@pytest.fixture
def stores(store: Engine) -> DatabaseInstallationStore:
    return DatabaseInstallationStore(engine=store, cipher=TokenCipher(KEY))


def installation(
    team: str | None,
    *,
    user: str = "UINSTALLER",
    token: str = "xoxb-1",
    enterprise: str | None = None,
    org: bool = False,
    **more: object,
) -> Installation:
    return Installation(
        app_id="A1",
        enterprise_id=enterprise,
        team_id=team,
        team_name=f"Team {team}",
        bot_token=token,
        bot_id="B1",
        bot_user_id="UBOT",
        bot_scopes="commands,chat:write",
        user_id=user,
        is_enterprise_install=org,
        installed_at=time.time(),
        **more,  # type: ignore[arg-type]
    )


async def test_an_install_is_saved_sealed_and_found_again(
    stores: DatabaseInstallationStore, store: Engine
) -> None:
    await stores.async_save(
        installation(
            "T1",
            token="xoxe.xoxb-1-secret",
            bot_refresh_token="xoxe-1-refresh",
            bot_token_expires_in=43_200,
            user_token="xoxp-user-secret",
            user_scopes="search:read",
            incoming_webhook_url="https://hooks.slack.com/services/T1/B1/secret",
            incoming_webhook_channel_id="C1",
        )
    )
    found = await stores.async_find_installation(enterprise_id=None, team_id="T1")
    assert found is not None
    assert (found.bot_token, found.bot_refresh_token) == ("xoxe.xoxb-1-secret", "xoxe-1-refresh")
    assert found.bot_token_expires_at is not None
    assert 11 * 3600 < found.bot_token_expires_at - time.time() <= 12 * 3600
    assert (found.user_token, found.user_scopes) == ("xoxp-user-secret", ["search:read"])
    assert found.incoming_webhook_url == "https://hooks.slack.com/services/T1/B1/secret"
    assert (found.bot_user_id, found.bot_id, found.bot_scopes) == (
        "UBOT",
        "B1",
        ["commands", "chat:write"],
    )
    bot = await stores.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None
    assert bot.bot_token == "xoxe.xoxb-1-secret"

    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        bot_row = session.exec(select(SlackBot)).one()
        person = session.exec(select(SlackInstallation)).one()
    stored = " ".join(
        str(value) for value in (*bot_row.model_dump().values(), *person.model_dump().values())
    )
    for secret in ("xoxb-1-secret", "xoxe-1-refresh", "xoxp-user-secret", "services/T1/B1"):
        assert secret not in stored, f"{secret} is stored in the clear"


async def test_installing_again_updates_and_the_latest_install_answers(
    stores: DatabaseInstallationStore, store: Engine
) -> None:
    await stores.async_save(installation("T1", user="UFIRST", token="xoxb-first"))
    await stores.async_save(installation("T1", user="USECOND", token="xoxb-second"))
    await stores.async_save(installation("T1", user="USECOND", token="xoxb-third"))
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert len(session.exec(select(SlackBot)).all()) == 1
        assert len(session.exec(select(SlackInstallation)).all()) == 2
    latest = await stores.async_find_installation(enterprise_id=None, team_id="T1")
    assert latest is not None
    assert (latest.user_id, latest.bot_token) == ("USECOND", "xoxb-third")
    # A person's older install comes with the workspace's current bot.
    first = await stores.async_find_installation(enterprise_id=None, team_id="T1", user_id="UFIRST")
    assert first is not None
    assert first.bot_token == "xoxb-third"
    assert await stores.async_find_installation(enterprise_id=None, team_id="T2") is None


async def test_an_org_wide_install_serves_every_workspace_of_its_org(
    stores: DatabaseInstallationStore,
) -> None:
    await stores.async_save(installation(None, enterprise="E1", org=True, token="xoxb-org"))
    await stores.async_save(installation("T9", enterprise="E2", token="xoxb-e2-t9"))
    for team in ("T5", "T6", None):
        for org in (True, False):
            bot = await stores.async_find_bot(
                enterprise_id="E1", team_id=team, is_enterprise_install=org
            )
            assert bot is not None, (team, org)
            assert bot.bot_token == "xoxb-org"
            found = await stores.async_find_installation(
                enterprise_id="E1", team_id=team, is_enterprise_install=org
            )
            assert found is not None
            assert found.is_enterprise_install
    # A workspace install of another org is not an org-wide one: its org's other workspaces
    # have none, and it serves only itself.
    assert await stores.async_find_bot(enterprise_id="E2", team_id="T8") is None
    assert await stores.async_find_bot(enterprise_id="E3", team_id="T5") is None
    # A workspace of the org with an install of its own uses that one.
    await stores.async_save(installation("T6", enterprise="E1", token="xoxb-t6"))
    own = await stores.async_find_bot(enterprise_id="E1", team_id="T6")
    assert own is not None
    assert own.bot_token == "xoxb-t6"


async def test_deleting_a_bot_a_person_or_all_of_an_install(
    stores: DatabaseInstallationStore,
) -> None:
    await stores.async_save(installation("T1", user="UA", token="xoxb-t1"))
    await stores.async_save(installation("T1", user="UB", token="xoxb-t1"))
    await stores.async_save(installation("T2", user="UA", token="xoxb-t2"))

    await stores.async_delete_bot(enterprise_id=None, team_id="T1")
    assert await stores.async_find_bot(enterprise_id=None, team_id="T1") is None
    orphan = await stores.async_find_installation(enterprise_id=None, team_id="T1")
    assert orphan is not None
    assert orphan.bot_token is None, "a revoked bot's token is not served from an install"

    await stores.async_delete_installation(enterprise_id=None, team_id="T1", user_id="UB")
    left = await stores.async_find_installation(enterprise_id=None, team_id="T1")
    assert left is not None
    assert left.user_id == "UA"

    await stores.async_delete_all(enterprise_id=None, team_id="T1")
    assert await stores.async_find_installation(enterprise_id=None, team_id="T1") is None
    untouched = await stores.async_find_bot(enterprise_id=None, team_id="T2")
    assert untouched is not None
    assert untouched.bot_token == "xoxb-t2"


async def test_a_rotated_bot_is_saved_over_the_old(stores: DatabaseInstallationStore) -> None:
    await stores.async_save(installation("T1", token="xoxe.xoxb-a", bot_refresh_token="xoxe-1-a"))
    bot = await stores.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None
    rotated = Bot(**bot.to_dict_for_copying())
    rotated.bot_token, rotated.bot_refresh_token = "xoxe.xoxb-b", "xoxe-1-b"
    rotated.bot_token_expires_at = int(time.time()) + 43_200
    await stores.async_save_bot(rotated)
    now = await stores.async_find_installation(enterprise_id=None, team_id="T1")
    assert now is not None
    assert (now.bot_token, now.bot_refresh_token) == ("xoxe.xoxb-b", "xoxe-1-b")


async def test_a_token_moved_to_another_row_does_not_open(
    stores: DatabaseInstallationStore, store: Engine
) -> None:
    await stores.async_save(installation("T1", token="xoxb-t1"))
    await stores.async_save(installation("T2", token="xoxb-t2"))
    with store.begin() as connection:
        sealed = connection.execute(
            select(SlackBot.bot_token_enc).where(col(SlackBot.installation) == "-:T1")
        ).scalar_one()
        connection.execute(
            update(SlackBot)
            .where(col(SlackBot.installation) == "-:T2")
            .values(bot_token_enc=sealed)
        )
    with pytest.raises(TokenDecryptError, match="does not decrypt"):
        await stores.async_find_bot(enterprise_id=None, team_id="T2")
    with (
        session_scope(store, workspace=PENDING_WORKSPACE) as session,
        pytest.raises(TokenDecryptError, match="DEBATEBOT_TOKEN_ENCRYPTION_KEY"),
    ):
        installations.check_key(session, cipher=TokenCipher(b"another key, 32 characters or more"))


async def test_a_state_passes_once_and_only_before_it_expires(store: Engine) -> None:
    states = DatabaseStateStore(engine=store)
    state = await states.async_issue()
    assert len(state) >= 40
    assert await states.async_consume(state)
    assert not await states.async_consume(state), "used up"
    assert not await states.async_consume("never-issued")

    late = await states.async_issue()
    with store.begin() as connection:
        connection.execute(
            update(OAuthState).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    assert not await states.async_consume(late), "expired"
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        kept = session.exec(select(OAuthState)).all()
        assert all(len(row.digest) == 64 and row.digest != late for row in kept)
    await states.async_issue()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert len(session.exec(select(OAuthState)).all()) == 1, "expired states are swept"


def test_what_happened_is_recorded_once_per_slack_event(store: Engine) -> None:
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        for _ in range(2):
            installations.record_event(
                session,
                enterprise_id=None,
                team_id="T1",
                kind=InstallationEventKind.UNINSTALLED,
                bot=True,
                event_id="Ev1",
            )
        installations.record_event(
            session,
            enterprise_id=None,
            team_id="T1",
            kind=InstallationEventKind.INSTALLED,
            bot=True,
            user_ids=["UA"],
        )
        history = installations.events(session, enterprise_id=None, team_id="T1")
    assert [(e.kind, e.user_ids) for e in history] == [
        (InstallationEventKind.UNINSTALLED, []),
        (InstallationEventKind.INSTALLED, ["UA"]),
    ]
