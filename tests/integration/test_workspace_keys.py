"""Keys that make triggers idempotent are each workspace's (issue 37): a debate's trigger key, a
handled trigger, a double click's window and a calibration label's key made in one workspace
neither stop nor answer the same key in another (a channel shared by two workspaces has one id
and one ts in both); Slack's event ids are looked up across workspaces, as Slack makes them
unique across workspaces. Migration 0023 brings a database's keys over with their rows. Every
test runs on SQLite and PostgreSQL unless it names one."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from bot.store import dedupe, labels, queue
from bot.store.calibration_tables import CalibrationLabel
from bot.store.db import alembic_config, make_engine, session_scope
from bot.store.debate_tables import Debate, DebateSource
from bot.store.dedupe_tables import ProcessedTrigger
from bot.store.errors import WorkspaceScopeError
from bot.store.tenancy import (
    EVERY_WORKSPACE,
    PENDING_TEAM,
    PENDING_WORKSPACE,
    Workspace,
    adopt_pending,
)
from engine.evaluation.scoring import ArmResult
from tests.integration.test_workspaces import ACME, GLOBEX, SPEC, add

SHARED = "thread:CSHARED:1700000001.000100"
"""The trigger key of one thread in a channel two workspaces share: the same in both."""


def results(run: str = "run-1") -> list[ArmResult]:
    return [
        ArmResult(
            case_id=f"case-{n}",
            task_type="adr_review",
            arm="adversarial",
            run_id=run,
            decision="approve",
            expected="approve",
            confidence=0.8,
        )
        for n in range(2)
    ]


def test_one_trigger_key_makes_a_debate_in_each_workspace(store: Engine) -> None:
    acme = add(store, ACME, SHARED, channel="CSHARED")
    globex = add(store, GLOBEX, SHARED, channel="CSHARED")
    assert acme != globex
    # The same trigger again in each workspace is that workspace's debate, not a new one.
    assert add(store, ACME, SHARED, channel="CSHARED") == acme
    assert add(store, GLOBEX, SHARED, channel="CSHARED") == globex
    for workspace, mine in ((ACME, acme), (GLOBEX, globex)):
        with session_scope(store, workspace=workspace) as session:
            found = queue.debate_for_key(session, trigger_key=SHARED)
            assert found is not None
            assert (found.id, found.team_id) == (mine, workspace.team_id)
            assert queue.count_debates(session) == 1
    with session_scope(store, workspace=Workspace(team_id="TOTHER")) as session:
        assert queue.debate_for_key(session, trigger_key=SHARED) is None
    # Still one debate per key in a workspace, whatever the code asks.
    with session_scope(store, workspace=ACME) as session:
        session.add(
            Debate(
                trigger_key=SHARED,
                source=DebateSource.COMMAND,
                question="twice?",
                protocol="adversarial",
                spec_json=SPEC.model_dump_json(),
            )
        )
        with pytest.raises(IntegrityError):
            session.flush()


def test_a_debate_is_queued_for_every_workspace_only_by_name(store: Engine) -> None:
    with (
        session_scope(store, workspace=EVERY_WORKSPACE) as session,
        pytest.raises(WorkspaceScopeError, match="one workspace"),
    ):
        queue.add_debate(
            session,
            new=queue.NewDebate(trigger_key=SHARED, spec=SPEC, source=DebateSource.COMMAND),
        )


def test_a_handled_key_and_a_double_click_are_each_workspaces(store: Engine) -> None:
    with session_scope(store, workspace=ACME) as session:
        assert dedupe.mark_processed(session, key="greeted:U1")
        assert not dedupe.mark_processed(session, key="greeted:U1")
        assert dedupe.open_window(session, key="note-form:1:U1", window_s=60)
        assert not dedupe.open_window(session, key="note-form:1:U1", window_s=60)
    with session_scope(store, workspace=GLOBEX) as session:
        # Another workspace's U1 (user ids are not unique across workspaces) is greeted too,
        # and its click opens its own window.
        assert not dedupe.was_processed(session, key="greeted:U1")
        assert dedupe.mark_processed(session, key="greeted:U1")
        assert dedupe.was_processed(session, key="greeted:U1")
        assert dedupe.open_window(session, key="note-form:1:U1", window_s=60)
        assert not dedupe.open_window(session, key="note-form:1:U1", window_s=60)
    with session_scope(store, workspace=ACME) as session:
        # GLOBEX's click neither reopened nor moved ACME's window.
        assert not dedupe.open_window(session, key="note-form:1:U1", window_s=60)
        assert dedupe.open_window(session, key="note-form:1:U1", window_s=0)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        rows = session.exec(select(ProcessedTrigger.team_id, ProcessedTrigger.key)).all()
    assert sorted(rows) == [
        ("TACME", "greeted:U1"),
        ("TACME", "note-form:1:U1"),
        ("TGLOBEX", "greeted:U1"),
        ("TGLOBEX", "note-form:1:U1"),
    ]


def test_an_event_id_is_looked_up_across_workspaces(store: Engine) -> None:
    """Slack's event ids are unique across workspaces: one handled by any workspace is that
    event sent again, whichever workspace it names now."""
    with session_scope(store, workspace=ACME) as session:
        assert dedupe.mark_processed(session, key=dedupe.event_key("Ev1"))
        with pytest.raises(WorkspaceScopeError, match="across workspaces"):
            dedupe.event_seen(session, event_id="Ev1")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert dedupe.event_seen(session, event_id="Ev1")
        assert not dedupe.event_seen(session, event_id="Ev2")
    with session_scope(store, workspace=GLOBEX) as session:
        assert not dedupe.was_processed(session, key=dedupe.event_key("Ev1"))


def test_an_eval_run_is_labelled_once_in_each_workspace(store: Engine) -> None:
    for workspace in (ACME, GLOBEX):
        with session_scope(store, workspace=workspace) as session:
            assert labels.import_eval(session, results=results()).added == 2
    with session_scope(store, workspace=ACME) as session:
        again = labels.import_eval(session, results=results())
        assert (again.added, again.present) == (0, 2)
        assert len(session.exec(select(CalibrationLabel)).all()) == 2
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        teams = session.exec(select(CalibrationLabel.team_id)).all()
    assert sorted(str(team) for team in teams) == ["TACME", "TACME", "TGLOBEX", "TGLOBEX"]


def test_adopting_pending_rows_drops_the_keys_the_workspace_holds(store: Engine) -> None:
    """A terminal imports an eval run again after the single-workspace bot learnt its id (the
    labels go to `pending`), and a key was handled both before and after: the next start
    keeps one of each, the workspace's."""
    t1 = Workspace(team_id="T1")
    for workspace in (t1, PENDING_WORKSPACE):
        with session_scope(store, workspace=workspace) as session:
            assert labels.import_eval(session, results=results()).added == 2
            assert dedupe.mark_processed(session, key="greeted:U1")
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        labels.import_eval(session, results=results("run-2"))
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert adopt_pending(session, workspace=t1) == 2
        label_teams = session.exec(select(CalibrationLabel.team_id)).all()
        trigger_teams = session.exec(select(ProcessedTrigger.team_id)).all()
    assert label_teams == ["T1"] * 4
    assert trigger_teams == ["T1"]


def test_the_keys_migrate_with_their_rows_and_the_way_back_needs_them_unique(
    database_url: str,
) -> None:
    """From 0020 with a debate, a handled trigger and a label: 0023 keeps them, then lets a
    second workspace hold the same keys; going back is refused while it does, and works once
    each key is held once."""
    config = alembic_config(database_url)
    command.upgrade(config, "0020")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO debate (team_id, trigger_key, source, channel_id, question,"
                    " protocol, spec_json, state, claims, cost_usd, created_at, updated_at)"
                    " VALUES (:team, :key, 'reaction', 'CSHARED', 'Old question?',"
                    " 'adversarial', :spec, 'queued', 0, 0, CURRENT_TIMESTAMP,"
                    " CURRENT_TIMESTAMP)"
                ),
                {"team": PENDING_TEAM, "key": SHARED, "spec": SPEC.model_dump_json()},
            )
            connection.execute(
                text(
                    "INSERT INTO processed_trigger (team_id, key, debate_id, created_at)"
                    " VALUES (:team, 'event:Ev1', 1, CURRENT_TIMESTAMP)"
                ),
                {"team": PENDING_TEAM},
            )
            connection.execute(
                text(
                    "INSERT INTO calibration_label (team_id, key, kind, task_type, protocol,"
                    " correct, confidence, sampled, created_at, updated_at) VALUES (:team,"
                    " 'eval:r:c:adversarial:planted', 'eval', 'adr_review', 'adversarial',"
                    " true, 0.8, false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"team": PENDING_TEAM},
            )
        command.upgrade(config, "head")
        t1 = Workspace(team_id="T1")
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            assert adopt_pending(session, workspace=t1) == 3
        with session_scope(engine, workspace=t1) as session:
            old = queue.debate_for_key(session, trigger_key=SHARED)
            assert old is not None
            assert old.question == "Old question?"
            old_id = old.id
            assert dedupe.was_processed(session, key="event:Ev1")
            assert not dedupe.mark_processed(session, key="event:Ev1")
            assert (
                labels.import_eval(
                    session,
                    results=[
                        ArmResult(
                            case_id="c",
                            task_type="adr_review",
                            arm="adversarial",
                            run_id="r",
                            decision="approve",
                            expected="approve",
                            confidence=0.8,
                        )
                    ],
                ).present
                == 1
            )
        # Another workspace of the org holds the same keys now.
        t2 = Workspace(team_id="T2", enterprise_id="E1")
        assert add(engine, t2, SHARED, channel="CSHARED") != old_id
        with session_scope(engine, workspace=t2) as session:
            assert dedupe.mark_processed(session, key="event:Ev1")

        with pytest.raises(RuntimeError, match="held by more than one workspace"):
            command.downgrade(config, "0020")
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM processed_trigger WHERE team_id = 'T2'"))
            connection.execute(text("DELETE FROM debate WHERE team_id = 'T2'"))
        command.downgrade(config, "0020")
        with engine.begin() as connection:
            assert connection.execute(text("SELECT trigger_key FROM debate")).all() == [(SHARED,)]
        # Back on 0020, a key is unique across the deployment again.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO processed_trigger (team_id, key, created_at)"
                    " VALUES ('T2', 'event:Ev1', CURRENT_TIMESTAMP)"
                )
            )
        command.upgrade(config, "head")
    finally:
        engine.dispose()
