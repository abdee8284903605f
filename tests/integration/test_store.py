"""The audit store on SQLite and PostgreSQL: schema, idempotent enqueue, leases, hash chain."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store import endings, outbox, queue, turns, verify
from bot.store.db import (
    SCHEMA_HEAD,
    alembic_config,
    check_schema,
    make_engine,
    session_scope,
    upgrade,
)
from bot.store.debate_tables import Debate, DebateSource, DebateState
from bot.store.errors import DatabaseUnavailableError, LeaseLostError, SchemaOutdatedError
from bot.store.outbox import Draft
from bot.store.outbox_tables import Outbox
from bot.store.tenancy import PENDING_WORKSPACE
from engine.models import DebateSpec, DebateStatus, ModelSettings, utcnow
from tests.helpers import DebateScript, reply_for, shipped_prompts

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
    max_rounds=2,
)


class SimulatedCrash(Exception):
    """Stands for the process dying between two turns."""


def enqueue(engine: Engine, key: str, spec: DebateSpec = SPEC) -> int:
    with Session(engine) as session:
        debate, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key=key, spec=spec, source=DebateSource.COMMAND)
        )
        assert debate.id is not None
        return debate.id


async def run_to_end(engine: Engine, script: DebateScript | None = None) -> int:
    script = script or DebateScript(
        moderator=[reply_for("moderator", recommend_another_round=True)]
    )
    llm = script.llm()
    worker = DebateWorker(
        engine=engine, resolve_llm=lambda _s: llm, prompts=shipped_prompts(), worker_id="w1"
    )
    assert await worker.run_once()
    return len(llm.calls)


def test_migrations_produce_exactly_the_models_schema(store: Engine) -> None:
    with store.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert diff == []
    check_schema(store)


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("debate", "source"),
        ("debate", "state"),
        ("debate", "triage"),
        ("outbox", "target"),
        ("outbox", "state"),
    ],
)
def test_a_state_outside_its_enum_is_refused_by_the_database(
    store: Engine, table: str, column: str
) -> None:
    """Sources, states and outbox kinds are enums in the code and CHECK constraints in the
    database, so a row written around the code (a hand edit, an old process) cannot hold a
    value the code has no name for."""
    debate_id = enqueue(store, f"check-{table}-{column}")
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        queue.get_debate(session, debate_id=debate_id)
    with store.begin() as connection:
        if table == "outbox":
            connection.execute(
                text(
                    "INSERT INTO outbox (team_id, debate_id, key, seq, part, action, target,"
                    " recipients,"
                    " fallback, channel_id, text, blocks, state, version, attempts,"
                    " next_attempt_at, deadline_at, deliveries, created_at)"
                    " VALUES ('pending', :d, 'k', 1, 0, 'post', 'thread', '[]', 'none', 'C1',"
                    " 't', '[]', 'pending', 1, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '[]',"
                    " CURRENT_TIMESTAMP)"
                ),
                {"d": debate_id},
            )
    with pytest.raises(IntegrityError), store.begin() as connection:
        connection.execute(
            text(
                f"UPDATE {table} SET {column} = 'bogus' WHERE "
                + ("id" if table == "debate" else "debate_id")
                + " = :d"
            ),
            {"d": debate_id},
        )


def test_an_unmigrated_database_says_to_upgrade(database_url: str) -> None:
    engine = make_engine(database_url)
    with pytest.raises(SchemaOutdatedError, match="run `debatebot db upgrade`"):
        check_schema(engine)
    engine.dispose()
    upgrade(database_url)
    engine = make_engine(database_url)
    check_schema(engine)
    engine.dispose()


def test_same_trigger_key_gives_the_same_debate(store: Engine) -> None:
    first = enqueue(store, "slack:C1:1700000000.1")
    second = enqueue(store, "slack:C1:1700000000.1")
    assert first == second
    with Session(store) as session:
        assert queue.count_debates(session) == 1


async def test_concurrent_enqueues_of_one_key_yield_one_debate(store: Engine) -> None:
    ids = await asyncio.gather(*(asyncio.to_thread(enqueue, store, "dup-key") for _ in range(8)))
    assert len(set(ids)) == 1
    with Session(store) as session:
        assert queue.count_debates(session) == 1


def test_claims_take_each_debate_once_and_reclaim_expired_leases(store: Engine) -> None:
    debate_id = enqueue(store, "claim-me")
    with Session(store) as session:
        claimed = queue.claim_debate(session, worker_id="a", lease_s=30)
        assert claimed is not None
        assert claimed.id == debate_id
        assert queue.claim_debate(session, worker_id="b", lease_s=30) is None
    # The lease runs out (set so, not slept for: a loaded machine would let it lapse early).
    with store.begin() as connection:
        connection.execute(
            update(Debate)
            .where(col(Debate.id) == debate_id)
            .values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    with Session(store) as session:
        stolen = queue.claim_debate(session, worker_id="b", lease_s=30)
        assert stolen is not None
        assert stolen.id == debate_id
        assert stolen.claims == 2
        with pytest.raises(LeaseLostError):
            queue.renew_lease(session, debate_id=debate_id, worker_id="a", lease_s=30)


async def test_worker_stores_every_turn_and_the_verdict(store: Engine) -> None:
    debate_id = enqueue(store, "full-run")
    calls = await run_to_end(store)

    with Session(store) as session:
        debate = queue.get_debate(session, debate_id=debate_id)
        rows = turns.turn_rows(session, debate_id=debate_id)
        verdict = endings.verdict_for(session, debate_id=debate_id)
        report = verify.verify_chain(session, debate_id=debate_id)
    assert debate.state == DebateState.FINISHED
    assert debate.outcome == DebateStatus.COMPLETE.value
    assert debate.lease_owner is None
    # The framing, two rounds of four, and the independent judge.
    assert len(rows) == calls == 10
    assert [row.seq for row in rows] == list(range(10))
    assert rows[-1].role == "independent_judge"
    assert verdict is not None
    assert verdict.decision == "revise"
    assert verdict.weights_version == "default-1"
    assert verdict.components_json is not None
    assert '"agreement":0.0' in verdict.components_json
    assert report.ok
    assert report.turns_checked == 10


async def test_tampering_with_a_turn_is_caught_at_the_first_broken_link(store: Engine) -> None:
    debate_id = enqueue(store, "tamper")
    await run_to_end(store)

    with store.begin() as connection:
        connection.execute(
            text("UPDATE turn SET raw_text = :t WHERE debate_id = :d AND seq = 3"),
            {"t": '{"thesis": "quietly rewritten"}', "d": debate_id},
        )
    with Session(store) as session:
        report = verify.verify_chain(session, debate_id=debate_id)
    assert not report.ok
    assert report.first_broken_seq == 3
    assert "altered" in (report.problem or "")


async def test_removing_a_turn_is_caught(store: Engine) -> None:
    debate_id = enqueue(store, "remove")
    await run_to_end(store)

    with store.begin() as connection:
        connection.execute(
            text("DELETE FROM turn WHERE debate_id = :d AND seq = 5"), {"d": debate_id}
        )
    with Session(store) as session:
        report = verify.verify_chain(session, debate_id=debate_id)
    assert report.first_broken_seq == 6
    assert "removed" in (report.problem or "")


async def test_resume_replays_stored_turns_and_asks_only_for_the_rest(store: Engine) -> None:
    debate_id = enqueue(store, "resume")
    script = DebateScript(moderator=[reply_for("moderator", recommend_another_round=True)])
    llm = script.llm()
    first = DebateWorker(
        engine=store,
        resolve_llm=lambda _s: llm,
        prompts=shipped_prompts(),
        worker_id="dies",
        config=WorkerConfig(lease_s=0.3),
    )
    debate = await first.claim()
    assert debate is not None
    stop_after = 4

    async def crash_after_four(event: object) -> None:
        with Session(store) as session:
            if len(turns.turn_rows(session, debate_id=debate_id)) >= stop_after:
                raise SimulatedCrash

    first.sinks = lambda _debate: crash_after_four
    with pytest.raises(SimulatedCrash):
        await first.execute(debate)
    await asyncio.sleep(0.4)

    second_llm = script.llm()
    second = DebateWorker(
        engine=store, resolve_llm=lambda _s: second_llm, prompts=shipped_prompts(), worker_id="b"
    )
    assert await second.run_once()
    with Session(store) as session:
        rows = turns.turn_rows(session, debate_id=debate_id)
        assert verify.verify_chain(session, debate_id=debate_id).ok
    assert len(rows) == 10
    assert len(second_llm.calls) == 10 - stop_after
    assert {row.request_sha256 for row in rows[:stop_after]}.isdisjoint(
        {row.request_sha256 for row in rows[stop_after:]}
    )


def test_an_unreachable_database_gives_advice() -> None:
    engine = make_engine("postgresql+psycopg://postgres:secret@127.0.0.1:1/nowhere")
    with (
        pytest.raises(DatabaseUnavailableError, match="DEBATEBOT_DATABASE_URL") as info,
        session_scope(engine, workspace=PENDING_WORKSPACE) as session,
    ):
        queue.count_debates(session)
    assert "secret" not in str(info.value)


def test_sqlite_locked_past_the_timeout_says_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.sqlite3'}"
    upgrade(url)
    holder = make_engine(url)
    impatient = make_engine(url, busy_timeout_s=0.2)
    with holder.connect() as connection:
        # Autobegin issues BEGIN IMMEDIATE: this connection now holds the write lock.
        connection.exec_driver_sql("UPDATE debate SET cost_usd = 0")
        with (
            pytest.raises(DatabaseUnavailableError, match="holds the SQLite write lock"),
            session_scope(impatient, workspace=PENDING_WORKSPACE) as session,
        ):
            queue.enqueue_debate(
                session,
                new=queue.NewDebate(trigger_key="blocked", spec=SPEC, source=DebateSource.COMMAND),
            )
        connection.rollback()
    with Session(impatient) as session:
        debate, created = queue.enqueue_debate(
            session,
            new=queue.NewDebate(trigger_key="blocked", spec=SPEC, source=DebateSource.COMMAND),
        )
    assert created
    assert debate.state == DebateState.QUEUED
    holder.dispose()
    impatient.dispose()


def test_the_schema_head_the_code_checks_is_alembics_head() -> None:
    """`bot.store.db.SCHEMA_HEAD` spares start-up alembic's import; it must not drift."""
    from alembic.script import ScriptDirectory

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == SCHEMA_HEAD


def test_channel_notices_move_into_the_outbox_and_back(database_url: str) -> None:
    """Migration 0015: the digests a channel was owed (one still due, one delivered) become
    outbox rows with no debate, delivered by the one loop; a downgrade puts them back."""
    config = alembic_config(database_url)
    command.upgrade(config, "0014")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        for key, state, ts in (
            ("digest:C1:2026-11-24", "sent", "1.2"),
            ("digest:C1:2026-11-25", "pending", None),
        ):
            connection.execute(
                text(
                    "INSERT INTO channel_notice (key, channel_id, text, blocks, state, attempts,"
                    " next_attempt_at, deadline_at, ts, created_at) VALUES (:k, 'C1', 'digest',"
                    " '[]', :s, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :ts, CURRENT_TIMESTAMP)"
                ),
                {"k": key, "s": state, "ts": ts},
            )
    engine.dispose()
    command.upgrade(config, "head")
    engine = make_engine(database_url)
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        rows = sorted(
            session.exec(select(Outbox).where(col(Outbox.debate_id).is_(None))).all(),
            key=lambda row: row.key,
        )
        assert [(r.key, r.state, r.target, r.deliveries) for r in rows] == [
            ("digest:C1:2026-11-24", "sent", "channel", [["C1", "1.2"]]),
            ("digest:C1:2026-11-25", "pending", "channel", []),
        ]
        draft = Draft(key="digest:C1:2026-11-25", text="again", blocks=[])
        assert not outbox.owe_channel(session, channel_id="C1", draft=draft), "owed once"
    engine.dispose()
    command.downgrade(config, "0014")
    engine = make_engine(database_url)
    with engine.connect() as connection:
        back = connection.execute(text("SELECT key, state, ts FROM channel_notice ORDER BY key"))
        assert [tuple(row) for row in back] == [
            ("digest:C1:2026-11-24", "sent", "1.2"),
            ("digest:C1:2026-11-25", "pending", None),
        ]
    engine.dispose()
    upgrade(database_url)
