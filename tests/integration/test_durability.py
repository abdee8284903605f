"""Durability with real processes: a worker killed by SIGKILL mid-debate, and many workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.store import endings, queue, turns, verify
from bot.store.db import make_engine
from bot.store.debate_tables import DebateSource, DebateState
from engine.models import DebateSpec, ModelSettings
from tests.migrated import upgrade

ROOT = Path(__file__).resolve().parents[2]
THREE_ROUNDS = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
    max_rounds=3,
)
TURNS_IN_THREE_ROUNDS = 1 + 4 * 3 + 1
"""The framing, three rounds of four, the independent judge."""


def start_worker(
    url: str,
    worker_id: str,
    call_log: Path,
    delay_s: float,
    moderator_s: float = 0.0,
    slow: str = "ModeratorTurn",
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.worker_process",
            url,
            worker_id,
            str(call_log),
            str(delay_s),
            str(moderator_s),
            slow,
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s}s")


def turn_count(engine: Engine, debate_id: int) -> int:
    with Session(engine) as session:
        return len(turns.turn_rows(session, debate_id=debate_id))


def test_sigkilled_worker_is_resumed_without_repeating_stored_turns(
    store: Engine, database_url: str, tmp_path: Path
) -> None:
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key="crash", spec=THREE_ROUNDS, source=DebateSource.COMMAND
            ),
        )
    assert debate.id is not None
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    first = start_worker(database_url, "doomed", first_log, delay_s=0.2)
    wait_for(lambda: turn_count(store, debate.id) >= 5, timeout_s=60)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL

    with Session(store) as session:
        stored_before = turns.turn_rows(session, debate_id=debate.id)
        assert queue.get_debate(session, debate_id=debate.id).state == DebateState.RUNNING
    assert 5 <= len(stored_before) < TURNS_IN_THREE_ROUNDS

    second = start_worker(database_url, "rescuer", second_log, delay_s=0.0)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err

    with Session(store) as session:
        final = queue.get_debate(session, debate_id=debate.id)
        rows = turns.turn_rows(session, debate_id=debate.id)
        report = verify.verify_chain(session, debate_id=debate.id)
    assert final.state == DebateState.FINISHED
    assert final.claims == 2
    assert len(rows) == TURNS_IN_THREE_ROUNDS
    assert len({(row.round, row.role, row.attempt) for row in rows}) == len(rows)
    assert [row.hash for row in rows[: len(stored_before)]] == [r.hash for r in stored_before]
    asked_again = set(second_log.read_text().split())
    assert asked_again.isdisjoint({row.request_sha256 for row in stored_before})
    assert len(second_log.read_text().split()) == TURNS_IN_THREE_ROUNDS - len(stored_before)
    assert report.ok, report.problem


ONE_ROUND_TURNS = [
    (0, "framing"),
    (1, "proposer"),
    (1, "critic"),
    (1, "rebuttal"),
    (1, "moderator"),
    (1, "independent_judge"),
]


@dataclass(frozen=True)
class LastCall:
    """A one-round debate of a protocol whose judge runs beside its last call: that call's
    output schema and (round, role, phase), and every turn the debate stores."""

    spec: DebateSpec
    schema: str
    key: tuple[int, str, str]
    turns: list[tuple[int, str, str]]


def keyed(rows: list[Any]) -> list[tuple[int, str, str]]:
    return sorted((row.round, row.role, row.phase) for row in rows)


LAST_CALLS = {
    "adversarial": LastCall(
        THREE_ROUNDS.model_copy(update={"max_rounds": 1}),
        "ModeratorTurn",
        (1, "moderator", ""),
        [(number, role, "") for number, role in ONE_ROUND_TURNS],
    ),
    "structured": LastCall(
        THREE_ROUNDS.model_copy(update={"protocol": "structured", "max_rounds": 1}),
        "Ruling",
        (4, "judge", "ruling"),
        [(n, "debater", "") for n in (1, 1, 2, 2, 3, 3)]
        + [(4, "judge", "PRO"), (4, "judge", "CON"), (4, "judge", "ruling")]
        + [(4, "independent_judge", "")],
    ),
}


@pytest.mark.parametrize("protocol", list(LAST_CALLS))
def test_a_worker_killed_after_the_judge_answered_beside_the_last_call_asks_only_that_call(
    store: Engine, database_url: str, tmp_path: Path, protocol: str
) -> None:
    """The judge runs beside the protocol's last call (the last moderation, the structured
    ruling); killed with the judge's answer stored and that call's not, the debate resumes
    asking that call alone."""
    last = LAST_CALLS[protocol]
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key=f"judge-kill-{protocol}", spec=last.spec, source=DebateSource.COMMAND
            ),
        )
    debate_id = debate.id
    assert debate_id is not None
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    def rows() -> list[Any]:
        with Session(store) as session:
            return turns.turn_rows(session, debate_id=debate_id)

    first = start_worker(
        database_url, "doomed", first_log, delay_s=0.05, moderator_s=120, slow=last.schema
    )
    try:
        wait_for(lambda: any(row.role == "independent_judge" for row in rows()), timeout_s=60)
    finally:  # killed here whether or not the judge came, so no worker outlives the test
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    assert last.key not in keyed(rows()), "killed between the judge's answer and the last call's"
    stored_before = rows()

    second = start_worker(database_url, "rescuer", second_log, delay_s=0.0, slow=last.schema)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err

    with Session(store) as session:
        final = queue.get_debate(session, debate_id=debate_id)
        stored = turns.turn_rows(session, debate_id=debate_id)
        report = verify.verify_chain(session, debate_id=debate_id)
        result = endings.verdict_for(session, debate_id=debate_id)
    assert final.state == DebateState.FINISHED
    assert keyed(stored) == sorted(last.turns)
    asked_again = second_log.read_text().split()
    assert len(asked_again) == 1, "only the last call is asked again"
    assert set(asked_again).isdisjoint({row.request_sha256 for row in stored_before})
    assert keyed([row for row in stored if row.request_sha256 in asked_again]) == [last.key]
    assert result is not None
    assert report.ok, report.problem


def queue_one_round_debates(engine: Engine, prefix: str, count: int) -> list[int]:
    spec = THREE_ROUNDS.model_copy(update={"max_rounds": 1})
    with Session(engine) as session:
        queued = [
            queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"{prefix}-{i}", spec=spec, source=DebateSource.COMMAND
                ),
            )[0].id
            for i in range(count)
        ]
    return [debate_id for debate_id in queued if debate_id is not None]


def assert_each_ran_exactly_once(engine: Engine, ids: list[int]) -> None:
    """Finished, claimed once, its five turns each asked once (no second attempt), one verdict,
    and its hash chain intact."""
    with Session(engine) as session:
        for debate_id in ids:
            debate = queue.get_debate(session, debate_id=debate_id)
            assert debate.state == DebateState.FINISHED, (debate_id, debate.error)
            assert debate.claims == 1
            rows = turns.turn_rows(session, debate_id=debate_id)
            assert sorted((row.round, row.role) for row in rows) == sorted(ONE_ROUND_TURNS)
            assert all(row.attempt == 1 for row in rows), "no turn was asked twice"
            assert endings.verdict_for(session, debate_id=debate_id) is not None
            assert verify.verify_chain(session, debate_id=debate_id).ok


def worker_env(url: str, delay_s: float) -> dict[str, str]:
    return {**os.environ, "DEBATEBOT_DATABASE_URL": url, "DEBATEBOT_FAKE_DELAY_S": str(delay_s)}


def test_four_worker_processes_run_forty_debates_exactly_once(postgres_url: str) -> None:
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    ids = queue_one_round_debates(engine, "bulk", 40)
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker", "--exit-when-idle", "--name", f"w{i}"],
            cwd=ROOT,
            env=worker_env(postgres_url, 0.02),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    assert_each_ran_exactly_once(engine, ids)
    engine.dispose()


def test_one_worker_process_runs_two_hundred_debates_at_once_each_exactly_once(
    postgres_url: str,
) -> None:
    """`worker --concurrency 200` on PostgreSQL, the fake model at 0.2 s a call. (How long it
    takes against one debate is benchmarks/scale.py's to say, not a test's.)"""
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    ids = queue_one_round_debates(engine, "burst", 200)
    worker = subprocess.run(
        [sys.executable, "-m", "bot.cli", "worker", "--concurrency", "200", "--exit-when-idle"],
        cwd=ROOT,
        env=worker_env(postgres_url, 0.2),
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert worker.returncode == 0, worker.stderr
    assert_each_ran_exactly_once(engine, ids)
    engine.dispose()


def test_the_worker_command_stops_on_sigterm_or_sigint_mid_debate_and_hands_back_its_lease(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'stop.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(trigger_key="stop", spec=THREE_ROUNDS, source=DebateSource.CLI),
        )
    assert debate.id is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(
        DEBATEBOT_DATABASE_URL=url,
        DEBATEBOT_PROVIDER="fake",
        DEBATEBOT_FAKE_DELAY_S="0.5",
        DEBATEBOT_SHUTDOWN_GRACE_S="0.5",
        DEBATEBOT_WORKER_POLL_S="0.1",
    )
    debatebot = str(Path(sys.executable).with_name("debatebot"))
    for signum in (signal.SIGTERM, signal.SIGINT):
        worker = subprocess.Popen(
            [debatebot, "worker", "--name", f"stopper-{signum}"],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        before = turn_count(engine, debate.id)
        wait_for(lambda before=before: turn_count(engine, debate.id) > before, 60)
        os.kill(worker.pid, signum)
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 0, stderr
        assert "handed back" in stderr
        with Session(engine) as session:
            row = queue.get_debate(session, debate_id=debate.id)
        assert row.state == DebateState.RUNNING
        assert row.lease_expires_at is not None
        assert row.lease_expires_at.timestamp() <= time.time(), "claimable again at once"
    finisher = subprocess.run(
        [debatebot, "worker", "--exit-when-idle"], env=env, text=True, capture_output=True
    )
    assert finisher.returncode == 0, finisher.stderr
    with Session(engine) as session:
        done = queue.get_debate(session, debate_id=debate.id)
    assert (done.state, done.claims) == (DebateState.FINISHED, 3)
    # The canned moderator asks for no second round: framing, one round and the independent
    # judge, each turn once.
    assert turn_count(engine, debate.id) == 6
    engine.dispose()
