"""`debatebot deliveries list/retry` (issue 44): a message given up is listed and owed again on
the operator's word; a sent one is refused; `--json` on both. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.store.installation_tables import SlackBot
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import PENDING_WORKSPACE
from engine.models import utcnow
from tests.integration.test_cancel import enqueue


def owed(engine: Engine, debate_id: int, key: str, state: OutboxState) -> int:
    with Session(engine) as session:
        row = Outbox(
            debate_id=debate_id,
            key=key,
            channel_id="CDEBATE",
            text=key,
            state=state,
            attempts=7,
            last_error="channel_not_found",
            deadline_at=utcnow() - timedelta(hours=1),
        )
        session.add(row)
        session.commit()
        assert row.id is not None
        return row.id


def test_the_operator_lists_and_retries_a_message_given_up(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.cli import main

    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    debate_id = enqueue(store, "owes")
    given_up = owed(store, debate_id, "verdict", OutboxState.FAILED)
    sent = owed(store, debate_id, "parent", OutboxState.SENT)

    assert main(["deliveries", "list"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"#{given_up}  given_up  debate {debate_id}  verdict")
    assert "after 7 attempt(s): channel_not_found" in line

    assert main(["deliveries", "retry", str(sent)]) == 1
    assert f"message {sent} is sent: only a message given up" in capsys.readouterr().err
    assert main(["deliveries", "retry", str(given_up), "--json"]) == 0
    retried = json.loads(capsys.readouterr().out)
    assert (retried["id"], retried["state"], retried["attempts"]) == (given_up, "pending", 0)
    with Session(store) as session:
        row = session.get(Outbox, given_up)
        assert row is not None
        assert row.deadline_at > utcnow()  # a fresh window, so it is not given up at once

    assert main(["deliveries", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_message_held_for_a_refused_token_is_listed_and_made_due_now(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.cli import main

    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    debate_id = enqueue(store, "held")
    held = owed(store, debate_id, "verdict", OutboxState.PENDING)
    with Session(store) as session:
        session.add(
            SlackBot(
                installation="pending-bot",
                team_id=PENDING_WORKSPACE.team_id,
                bot_token_enc="unused",
                refused_code="token_revoked",
            )
        )
        session.commit()

    assert main(["deliveries", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["id"], listed["why"], listed["state"]) == (held, "held", "pending")
    assert main(["deliveries", "retry", str(held)]) == 0
    assert f"message #{held} (verdict) is owed again" in capsys.readouterr().out
