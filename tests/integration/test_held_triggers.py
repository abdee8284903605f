"""Slack events kept for later, as the store keeps them (bot.store.held), on SQLite and
PostgreSQL: once per workspace and event id, at most `max_held` a workspace, each due row
handed to one replica, none of a workspace whose token Slack refuses, and forgotten only by
the replayer still holding it."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine
from sqlmodel import select

from bot.store import held, refusals
from bot.store.db import session_scope
from bot.store.held import Held, HeldLimits
from bot.store.held_tables import HeldReason, HeldTrigger
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from engine.models import utcnow
from tests.integration.test_token_refusals import ACME, install, refuse

OTHER = Workspace(team_id="TOTHER")
LIMITS = HeldLimits(max_held=2)


def keep(engine: Engine, workspace: Workspace, key: str, *, due_in_s: float = 0.0) -> Held:
    now = utcnow()
    with session_scope(engine, workspace=workspace) as session:
        return held.hold(
            session,
            key=key,
            body='{"event": {}}',
            reason=HeldReason.TOKEN_REFUSED,
            event_at=now,
            due_at=now + timedelta(seconds=due_in_s),
            user_id="UALICE",
            channel_id="CDEBATE",
            limits=LIMITS,
        )


def claim(engine: Engine, owner: str) -> list[tuple[str | None, str, int]]:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        rows = held.claim(session, owner=owner, claim_s=60, limit=10)
    return [(row.team_id, row.key, row.attempts) for row in rows]


def count(engine: Engine, workspace: Workspace | None = None) -> int:
    with session_scope(engine, workspace=workspace or EVERY_WORKSPACE) as session:
        return held.held_count(session)


def test_an_event_is_kept_once_per_workspace_and_a_workspace_keeps_a_bounded_number(
    store: Engine,
) -> None:
    assert keep(store, ACME, "event:Ev1") is Held.NEW
    assert keep(store, ACME, "event:Ev1") is Held.AGAIN
    assert keep(store, OTHER, "event:Ev1") is Held.NEW, "another workspace's key is its own"
    assert keep(store, ACME, "event:Ev2") is Held.NEW
    assert keep(store, ACME, "event:Ev3") is Held.FULL
    assert (count(store, ACME), count(store, OTHER)) == (2, 1)


def test_each_due_row_goes_to_one_replica_and_a_refused_workspace_waits(store: Engine) -> None:
    install(store, team=ACME.team_id)
    keep(store, ACME, "event:Ev1")
    keep(store, OTHER, "event:Ev2")
    keep(store, OTHER, "event:Later", due_in_s=3600)
    refuse(store, ACME)

    assert claim(store, "replica-a") == [("TOTHER", "event:Ev2", 1)]
    assert claim(store, "replica-b") == [], "claimed already, and the rest not due or held"

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.accept(session, installation="-:TACME")
    assert claim(store, "replica-b") == [("TACME", "event:Ev1", 1)]


def test_a_row_is_forgotten_by_its_replayer_unless_the_replay_kept_it_again(store: Engine) -> None:
    keep(store, ACME, "event:Ev1")
    keep(store, ACME, "event:Ev2")
    first, second = claim(store, "replica-a")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        ids = {row.key: row.id for row in session.exec(select(HeldTrigger))}
    # The replay of Ev2 met the refusal again: kept again, its claim handed back.
    assert keep(store, ACME, second[1]) is Held.AGAIN
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert held.finish(session, row_id=ids[first[1]] or 0, owner="replica-a")
        assert not held.finish(session, row_id=ids[second[1]] or 0, owner="replica-a")
        assert not held.finish(session, row_id=ids[first[1]] or 0, owner="replica-a")
    assert count(store) == 1
    assert claim(store, "replica-b") == [("TACME", "event:Ev2", 2)]
