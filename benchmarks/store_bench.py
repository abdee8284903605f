"""Audit-store speed: per-turn write latency (SQLite, PostgreSQL) and claim throughput.

- Write latency: the worker's path for one turn (session, lease check, chain lookup, insert,
  commit), timed per call for `--turns` turns; median and p95 per backend, in one run.
- Claims: `--debates` queued debates taken by 4 claimer processes on PostgreSQL; claims/s.

    DEBATEBOT_TEST_POSTGRES_URL=$(scripts/postgres) .venv/bin/python -m benchmarks.store_bench
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from bot.store import repository
from bot.store.db import make_engine, upgrade
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


def write_latencies(url: str, turns: int) -> list[float]:
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        debate, _ = repository.enqueue_debate(session, trigger_key="bench", spec=SPEC, source="b")
        repository.claim_debate(session, worker_id="bench", lease_s=600)
    assert debate.id is not None
    samples = []
    for index in range(turns):
        record = turn(index)
        started = time.perf_counter()
        with Session(engine) as session:
            repository.append_turn(session, debate_id=debate.id, worker_id="bench", turn=record)
        samples.append(time.perf_counter() - started)
    engine.dispose()
    return samples


def claimer(url: str) -> None:
    """Claim until the queue is empty; print the wall-clock window of this process's claims."""
    engine = make_engine(url)
    claims = 0
    with Session(engine) as session:
        first = time.time()
        while repository.claim_debate(session, worker_id=f"c{os.getpid()}", lease_s=600):
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
            repository.enqueue_debate(session, trigger_key=f"q{i}", spec=SPEC, source="b")
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
        assert repository.count_debates(session, state="queued") == 0
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
    postgres = write_latencies(fresh_postgres(base), args.turns)
    print(describe("sqlite", sqlite))
    print(describe("postgres", postgres))
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
