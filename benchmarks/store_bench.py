"""Audit-store speed: per-turn write latency, two designs for concurrent turn writes, and claim
throughput (SQLite and PostgreSQL).

- Write latency: the worker's path for one turn (one `append_turns` transaction with the chain
  head in memory), timed per call for `--turns` turns; median and p95 per backend.
- Concurrent writes, the choice issue 14 asked to measure: `--debates` debates (200) each storing
  5 turns one after another, all at once, as a worker with that concurrency does. Design A is
  the group-commit writer the worker uses (`bot.store.writer.TurnWriter`: the store's own
  threads, every turn that arrives while a batch commits goes in the next). Design B is an async
  driver through SQLAlchemy's asyncio extension (aiosqlite; psycopg's async API), one
  transaction per turn. Turns per second for each, in one run.
- Claims: `--debates` queued debates taken by 4 claimer processes on PostgreSQL; claims/s.

    DEBATEBOT_TEST_POSTGRES_URL=$(scripts/postgres) .venv/bin/python -m benchmarks.store_bench
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, insert, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session, col

from bot.store import queue, turns
from bot.store.db import make_engine, upgrade
from bot.store.debate_tables import Debate, DebateSource, DebateState, Turn
from bot.store.writer import TurnWriter
from engine.models import DebateSpec, Role, TurnRecord, Usage

ROOT = Path(__file__).resolve().parents[1]
SPEC = DebateSpec(question="Benchmark question?")


def fresh_postgres(base: str) -> str:
    name = f"debatebot_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


def turn(index: int) -> TurnRecord:
    return TurnRecord(
        round=index // 4 + 1,
        role=list(Role)[index % 5],
        attempt=index + 1,
        provider="fake",
        model="fake-model",
        prompt_sha256="a" * 64,
        request_sha256="b" * 64,
        usage=Usage(input_tokens=1200, output_tokens=300),
        cost_usd=0.0012,
        latency_s=1.5,
        raw_text='{"thesis": "' + "x" * 1500 + '"}',
        parsed={"thesis": "x" * 1500},
    )


def write_latencies(url: str, count: int) -> list[float]:
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(trigger_key="bench", spec=SPEC, source=DebateSource.COMMAND),
        )
        debate_id = debate.id
        queue.claim_debate(session, worker_id="bench", lease_s=600)
    assert debate_id is not None
    samples = []
    head = turns.ChainHead()
    for index in range(count):
        write = turns.TurnWrite(debate_id, "bench", turn(index), head)
        started = time.perf_counter()
        with Session(engine) as session:
            (outcome,) = turns.append_turns(session, writes=[write])
        samples.append(time.perf_counter() - started)
        assert isinstance(outcome, turns.ChainHead)
        head = outcome
    engine.dispose()
    return samples


def claimed_debates(url: str, debates: int) -> list[int]:
    """`debates` fresh debates in a migrated database at `url`, each claimed by "bench"."""
    upgrade(url)
    engine = make_engine(url)
    ids = []
    with Session(engine) as session:
        for index in range(debates):
            debate, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"w{index}", spec=SPEC, source=DebateSource.COMMAND
                ),
            )
            assert debate.id is not None
            ids.append(debate.id)
        while queue.claim_debate(session, worker_id="bench", lease_s=600):
            pass
    engine.dispose()
    return ids


async def group_commit(url: str, ids: list[int], count: int) -> float:
    """Design A: seconds for every debate to store `count` turns through one TurnWriter."""
    engine = make_engine(url)
    writer = TurnWriter(engine)

    async def debate(debate_id: int) -> None:
        head = turns.ChainHead()
        for index in range(count):
            head = await writer.append(turns.TurnWrite(debate_id, "bench", turn(index), head))

    started = time.perf_counter()
    await asyncio.gather(*(debate(i) for i in ids))
    elapsed = time.perf_counter() - started
    engine.dispose()
    return elapsed


async def async_driver(url: str, ids: list[int], count: int) -> float:
    """Design B: the same writes through SQLAlchemy's asyncio extension, one transaction each
    (lease check, insert, commit), as the worker's old path did on a thread."""
    from sqlalchemy.ext.asyncio import create_async_engine

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    engine = create_async_engine(
        parsed, connect_args={"timeout": 30} if parsed.get_backend_name() == "sqlite" else {}
    )

    async def debate(debate_id: int) -> None:
        head = turns.ChainHead()
        for index in range(count):
            row = turns.turn_row(turns.TurnWrite(debate_id, "bench", turn(index), head))
            async with engine.begin() as connection:
                owner = (
                    await connection.execute(
                        select(col(Debate.lease_owner))
                        .where(col(Debate.id) == debate_id)
                        .with_for_update()
                    )
                ).scalar_one()
                assert owner == "bench"
                await connection.execute(insert(Turn), [row])
            head = turns.ChainHead(seq=row["seq"], hash=row["hash"])

    started = time.perf_counter()
    await asyncio.gather(*(debate(i) for i in ids))
    elapsed = time.perf_counter() - started
    await engine.dispose()
    return elapsed


def concurrent_writes(url_for: Callable[[], str], debates: int, count: int) -> str:
    """Turns/s of both designs on fresh databases from `url_for`, in one run."""
    rates = []
    for design in (group_commit, async_driver):
        url = url_for()
        ids = claimed_debates(url, debates)
        elapsed = asyncio.run(design(url, ids, count))
        rates.append(debates * count / elapsed)
    return (
        f"{debates} debates x {count} turns at once: group-commit writer {rates[0]:.0f} turns/s,"
        f" async driver {rates[1]:.0f} turns/s (writer / driver {rates[0] / rates[1]:.1f}x)"
    )


def claimer(url: str) -> None:
    """Claim until the queue is empty; print the wall-clock window of this process's claims."""
    engine = make_engine(url)
    claims = 0
    with Session(engine) as session:
        first = time.time()
        while queue.claim_debate(session, worker_id=f"c{os.getpid()}", lease_s=600):
            claims += 1
        last = time.time()
    engine.dispose()
    print(f"{first} {last} {claims}")


def claim_throughput(url: str, debates: int, processes: int) -> tuple[float, list[int]]:
    """Claims per second from the first claimer's first claim to the last one's end."""
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        for i in range(debates):
            queue.enqueue_debate(
                session,
                new=queue.NewDebate(trigger_key=f"q{i}", spec=SPEC, source=DebateSource.COMMAND),
            )
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.store_bench", "--claimer", url],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    windows = [worker.communicate()[0].split() for worker in workers]
    elapsed = max(float(w[1]) for w in windows) - min(float(w[0]) for w in windows)
    with Session(engine) as session:
        assert queue.count_debates(session, state=DebateState.QUEUED) == 0
    engine.dispose()
    return debates / elapsed, [int(w[2]) for w in windows]


def describe(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return (
        f"{name}: per-turn write median {statistics.median(ms):.2f} ms,"
        f" p95 {ms[int(len(ms) * 0.95)]:.2f} ms over {len(ms)} turns"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--debates", type=int, default=400)
    parser.add_argument("--writers", type=int, default=200, help="debates writing at once")
    parser.add_argument("--claimer")
    args = parser.parse_args()
    if args.claimer:
        claimer(args.claimer)
        return
    base = os.environ.get("DEBATEBOT_TEST_POSTGRES_URL")
    if not base:
        raise SystemExit("set DEBATEBOT_TEST_POSTGRES_URL (scripts/postgres prints one)")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = write_latencies(f"sqlite:///{tmp}/bench.sqlite3", args.turns)
        files = iter(range(100))
        sqlite_writes = concurrent_writes(
            lambda: f"sqlite:///{tmp}/writes-{next(files)}.sqlite3", args.writers, 5
        )
    postgres = write_latencies(fresh_postgres(base), args.turns)
    postgres_writes = concurrent_writes(lambda: fresh_postgres(base), args.writers, 5)
    print(describe("sqlite", sqlite))
    print(describe("postgres", postgres))
    print(f"sqlite:   {sqlite_writes}")
    print(f"postgres: {postgres_writes}")
    print(
        f"postgres / sqlite median write ratio:"
        f" {statistics.median(postgres) / statistics.median(sqlite):.2f}"
    )
    rate, shares = claim_throughput(fresh_postgres(base), args.debates, processes=4)
    print(
        f"postgres claims with 4 processes: {rate:.0f} claims/s over {args.debates} debates"
        f" (claims per process: {shares})"
    )


if __name__ == "__main__":
    main()
