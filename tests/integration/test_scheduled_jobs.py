"""Scheduled jobs on SQLite and PostgreSQL: once per slot across replicas, retention that
removes only what it archived and verified, stale leases back in the queue, queue warnings."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from bot.jobs.notifier import DebateNotifier
from bot.jobs.scheduled import ScheduledJobs, slot_of
from bot.jobs.worker import DebateWorker
from bot.settings import Settings
from bot.store import queue, turns
from bot.store.db import make_engine
from bot.store.debate_tables import Debate, DebateSource, DebateState, Turn
from bot.store.errors import DatabaseUnavailableError
from bot.store.export import verify_export
from bot.store.schedule_tables import ScheduledRun
from engine.models import DebateSpec, ModelSettings, utcnow
from tests.helpers import DebateScript, shipped_prompts

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


def jobs_on(engine: Engine, runner: str, **settings: Any) -> ScheduledJobs:
    return ScheduledJobs(
        engine=engine,
        settings=Settings(**settings),
        notifier=DebateNotifier(engine=engine),
        runner=runner,
    )


def queue_debates(engine: Engine, count: int, prefix: str = "job") -> list[int]:
    ids = []
    with Session(engine) as session:
        for n in range(count):
            debate, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"{prefix}:{n}", spec=SPEC, source=DebateSource.CLI
                ),
            )
            assert debate.id is not None
            ids.append(debate.id)
    return ids


def second_engine(store: Engine) -> Engine:
    """Another replica's connection pool to the same database."""
    return make_engine(store.url.render_as_string(hide_password=False))


async def test_a_job_runs_once_per_slot_however_many_replicas_fire_it(store: Engine) -> None:
    other = second_engine(store)
    replicas = [jobs_on(store, "replica-a"), jobs_on(other, "replica-b")]
    runs: list[str] = []
    release = asyncio.Event()

    async def body(name: str) -> str:
        runs.append(name)
        await release.wait()
        return f"ran on {name}"

    async def fire(jobs: ScheduledJobs) -> str | None:
        return await jobs.fire("example", lambda: body(jobs.runner), 60)

    first = asyncio.create_task(fire(replicas[0]))
    while not runs:  # noqa: ASYNC110 (the body records its start; nothing to await on)
        await asyncio.sleep(0.01)
    assert await fire(replicas[1]) is None, "the lock (or the slot row) turns the second away"
    release.set()
    assert await first == "ran on replica-a"
    assert await fire(replicas[1]) is None, "the slot is done"
    assert runs == ["replica-a"]
    with Session(store) as session:
        (row,) = session.exec(select(ScheduledRun))
    assert (row.job, row.runner, row.outcome, row.detail) == (
        "example",
        "replica-a",
        "ok",
        "ran on replica-a",
    )
    other.dispose()


async def test_while_one_replica_runs_a_job_no_other_starts_it_even_for_a_new_slot(
    store: Engine,
) -> None:
    """The advisory lock on PostgreSQL; on SQLite, one process and its own lock."""
    other = second_engine(store) if store.dialect.name == "postgresql" else store
    now = utcnow()
    a = jobs_on(store, "replica-a")
    b = jobs_on(other, "replica-b")
    if other is store:
        b.lock = a.lock
    b.clock = lambda: now + timedelta(minutes=5)
    started, release = asyncio.Event(), asyncio.Event()

    async def long_job() -> str:
        started.set()
        await release.wait()
        return "done"

    running = asyncio.create_task(a.fire("long", long_job, 60))
    await started.wait()
    assert await b.fire("long", long_job, 60) is None
    release.set()
    assert await running == "done"
    assert await b.fire("long", long_job, 60) == "done", "free again once the holder finished"
    if other is not store:
        other.dispose()


def test_slots_are_the_same_on_every_replica() -> None:
    moment = utcnow().replace(hour=10, minute=7, second=13, microsecond=0)
    assert slot_of(moment, 300) == slot_of(moment + timedelta(seconds=100), 300)
    assert slot_of(moment, 300) != slot_of(moment + timedelta(minutes=5), 300)
    assert slot_of(moment, 300).endswith("10:05:00")


async def finished(store: Engine, count: int) -> list[int]:
    ids = queue_debates(store, count, prefix="old")
    llm = DebateScript().llm()
    worker = DebateWorker(
        engine=store, resolve_llm=lambda _s: llm, prompts=shipped_prompts(), worker_id="w"
    )
    await worker.run_pool(asyncio.Event(), concurrency=count, exit_when_idle=True)
    return ids


async def test_retention_removes_only_debates_whose_archive_verifies(
    store: Engine, tmp_path: Path
) -> None:
    debates = await finished(store, 4)
    old, young = debates[:3], debates[3]
    tampered = old[1]
    with Session(store) as session:
        session.execute(
            update(Debate)
            .where(col(Debate.id).in_(old))
            .values(updated_at=utcnow() - timedelta(days=40))
        )
        session.execute(
            update(Turn)
            .where(col(Turn.debate_id) == tampered, col(Turn.seq) == 2)
            .values(raw_text="rewritten after the fact")
        )
        session.commit()
    archive = tmp_path / "archive"
    jobs = jobs_on(store, "r", retention_days=30, retention_dir=archive)

    detail = await jobs.fire("retention", jobs.retention, 3600)

    kept = f"kept [{tampered}] (archive not verified)"
    assert detail == f"2 debate(s) archived to {archive} and removed; {kept}"
    with Session(store) as session:
        left = sorted(d.id for d in session.exec(select(Debate)) if d.id is not None)
        turns_left = {t.debate_id for t in session.exec(select(Turn))}
    assert left == sorted([young, tampered])
    assert turns_left == {young, tampered}
    for debate_id in (old[0], old[2]):
        record = json.loads((archive / f"debate-{debate_id}.json").read_text())
        report = verify_export(record, key=None)
        assert report.ok
        assert report.turns_checked == 6, "the framing, one round, the independent judge"
    assert not (archive / f"debate-{tampered}.json").exists()
    assert not list(archive.glob("*.partial"))


def test_retention_needs_a_folder_for_its_archive() -> None:
    with pytest.raises(ValueError, match="DEBATEBOT_RETENTION_DIR is not"):
        Settings(retention_days=30)


async def test_a_dead_workers_debate_goes_back_to_the_queue_and_a_long_wait_is_logged(
    store: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    queue_debates(store, 2, prefix="stuck")
    with Session(store, expire_on_commit=False) as session:
        [held] = queue.claim_debates(session, worker_id="dead-worker", lease_s=5, limit=1)
    jobs = jobs_on(store, "r", worker_lease_s=5, queue_warn_s=60)
    jobs.clock = lambda: utcnow() + timedelta(seconds=120)

    with caplog.at_level(logging.INFO, logger="bot.jobs.scheduled"):
        assert await jobs.fire("stale-leases", jobs.stale_leases, 60) == (
            "1 debate(s) requeued, 0 message(s) released"
        )
        assert await jobs.fire("queue-depth", jobs.queue_depth, 60) == "2 waiting, oldest 120 s"

    with Session(store) as session:
        row = queue.get_debate(session, debate_id=held.id or 0)
    assert (row.state, row.lease_owner) == (DebateState.QUEUED, None)
    assert f"debate {held.id}: worker dead-worker stopped renewing its lease" in caplog.text
    assert "2 debate(s) waiting for a worker, the oldest for 120 s" in caplog.text


async def test_a_job_that_fails_is_recorded_and_the_next_slot_runs_it_again(store: Engine) -> None:
    jobs = jobs_on(store, "r")
    moments = iter([utcnow(), utcnow() + timedelta(minutes=2)])
    jobs.clock = lambda: next(moments)

    async def broken() -> str:
        raise DatabaseUnavailableError("database x unavailable (gone): start it")

    assert await jobs.fire("flaky", broken, 60) == (
        "DatabaseUnavailableError: database x unavailable (gone): start it"
    )

    async def fine() -> str:
        return "done"

    assert await jobs.fire("flaky", fine, 60) == "done"
    with Session(store) as session:
        runs = session.exec(select(ScheduledRun).order_by(col(ScheduledRun.slot))).all()
    assert [run.outcome for run in runs] == ["failed", "ok"]


async def test_retention_that_cannot_write_its_archive_removes_nothing(
    store: Engine, tmp_path: Path
) -> None:
    [debate_id] = await finished(store, 1)
    with Session(store) as session:
        session.execute(update(Debate).values(updated_at=utcnow() - timedelta(days=40)))
        session.commit()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    jobs = jobs_on(store, "r", retention_days=30, retention_dir=blocked / "archive")

    detail = await jobs.fire("retention", jobs.retention, 3600)

    assert detail is not None
    assert detail.startswith(("NotADirectoryError", "FileExistsError"))
    with Session(store) as session:
        assert queue.get_debate(session, debate_id=debate_id).state == DebateState.FINISHED
        assert len(turns.turn_rows(session, debate_id=debate_id)) == 6


async def test_three_replicas_firing_every_job_at_once_run_each_once_per_slot(
    store: Engine, tmp_path: Path
) -> None:
    """Every job of the schedule, fired by three replicas for the same slot at the same moment:
    one run each, recorded once, and its work (an archived debate, a requeued lease) done once."""
    [old] = await finished(store, 1)
    [stuck] = queue_debates(store, 1, prefix="stuck")
    with Session(store) as session:
        session.execute(
            update(Debate)
            .where(col(Debate.id) == old)
            .values(updated_at=utcnow() - timedelta(days=40))
        )
        session.execute(
            update(Debate)
            .where(col(Debate.id) == stuck)
            .values(
                state=DebateState.RUNNING,
                lease_owner="a-dead-worker",
                lease_expires_at=utcnow() - timedelta(minutes=10),
            )
        )
        session.commit()
    engines = [store, second_engine(store), second_engine(store)]
    now = utcnow()
    replicas = [
        jobs_on(engine, f"replica-{n}", retention_days=30, retention_dir=tmp_path / "archive")
        for n, engine in enumerate(engines)
    ]
    for replica in replicas:
        replica.clock = lambda: now
    names = list(replicas[0].jobs())
    assert set(names) >= {"review-sla", "digest", "retention", "stale-leases", "queue-depth"}

    outcomes = await asyncio.gather(
        *(replica.fire(name, replica.jobs()[name], 600) for name in names for replica in replicas)
    )

    ran = [detail for detail in outcomes if detail is not None]
    assert len(ran) == len(names), f"one run per job, not {ran}"
    with Session(store) as session:
        rows = session.exec(select(ScheduledRun)).all()
        assert sorted(r.job for r in rows) == sorted(names)
        assert all(r.slot == slot_of(now, 600) and r.outcome == "ok" for r in rows)
        details = {r.job: r.detail for r in rows}
        assert details["retention"] is not None
        assert details["stale-leases"] is not None
        assert details["retention"].startswith("1 debate(s) archived")
        assert details["stale-leases"].startswith("1 debate(s) requeued")
        assert queue.get_debate(session, debate_id=stuck).state == DebateState.QUEUED
        assert session.get(Debate, old) is None
    assert len(list((tmp_path / "archive").iterdir())) == 1
    for engine in engines[1:]:
        engine.dispose()
