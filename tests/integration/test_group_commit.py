"""Turns of many debates committed together, claims in batches, one worker running many
debates: cheaper, with the same guarantees (issue 14). On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, update
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select

from bot.jobs.closing import FinishWriter
from bot.jobs.worker import DebateWorker, WorkerConfig, start_delays
from bot.metrics import Metrics
from bot.store import endings, outbox, outbox_deliveries, queue, reviews, turns, verify
from bot.store.channel_tables import ChannelSettings
from bot.store.db import make_engine
from bot.store.debate_tables import Debate, DebateSource, DebateState, VerdictRecord
from bot.store.errors import DatabaseUnavailableError, LeaseLostError, StoreRefusedError
from bot.store.review_tables import Escalation
from bot.store.turns import ChainHead, TurnWrite
from bot.store.writer import TurnWriter
from engine.llm import LLMRequest
from engine.models import (
    ConfidenceLevel,
    DebateSpec,
    DebateStatus,
    Decision,
    ModelSettings,
    Role,
    TurnRecord,
    Usage,
    utcnow,
)
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import DebateScript, reply_for, shipped_prompts
from tests.migrated import upgrade

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)

TURNS = 6
"""The canned debate's turns: the framing, one round of four, the independent judge."""


def queued(engine: Engine, count: int) -> list[int]:
    ids = []
    with Session(engine) as session:
        for index in range(count):
            debate, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"gc:{index}", spec=SPEC, source=DebateSource.COMMAND
                ),
            )
            assert debate.id is not None
            ids.append(debate.id)
    return ids


def claimed(engine: Engine, count: int, worker: str = "w1") -> list[int]:
    ids = queued(engine, count)
    with Session(engine, expire_on_commit=False) as session:
        taken = queue.claim_debates(session, worker_id=worker, lease_s=600, limit=count)
    assert sorted(d.id for d in taken if d.id is not None) == ids
    return ids


def turn(index: int, role: Role = Role.PROPOSER) -> TurnRecord:
    return TurnRecord(
        round=1,
        role=role,
        attempt=index + 1,
        provider="fake",
        model="fake-model",
        prompt_sha256="a" * 64,
        request_sha256="b" * 64,
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=0.0,
        latency_s=0.1,
        raw_text=f'{{"n": {index}}}',
        parsed={"n": index},
    )


def commits(engine: Engine) -> list[int]:
    """A list that grows by one at every commit on `engine`."""
    seen: list[int] = []
    event.listen(engine, "commit", lambda _connection: seen.append(1))
    return seen


def pool_worker(
    engine: Engine,
    llm: FunctionLLM | None = None,
    *,
    poll_s: float = 0.05,
    waves: tuple[int, float] = (25, 0.01),
) -> DebateWorker:
    """A worker on `llm` (the canned debate by default), polling every `poll_s`, starting the
    debates of a claim in `waves` of (debates, seconds apart)."""
    llm = llm or DebateScript().llm()
    return DebateWorker(
        engine=engine,
        resolve_llm=lambda _s: llm,
        prompts=shipped_prompts(),
        worker_id="pool",
        config=WorkerConfig(poll_s=poll_s, start_wave=waves[0], start_gap_s=waves[1]),
    )


@contextlib.contextmanager
def failing(
    engine: Engine, fault: Callable[..., None], name: str = "before_cursor_execute"
) -> Iterator[None]:
    """`fault` listens to the engine's `name` event (every statement, by default) while the
    block runs."""
    event.listen(engine, name, fault)
    try:
        yield
    finally:
        event.remove(engine, name, fault)


async def run_pool_while(
    engine: Engine, worker: DebateWorker, name: str, fault: Callable[..., None], concurrency: int
) -> None:
    """Run `worker`'s pool until idle with `fault` listening to the engine's `name` event."""
    with failing(engine, fault, name):
        await asyncio.wait_for(
            worker.run_pool(asyncio.Event(), concurrency=concurrency, exit_when_idle=True),
            timeout=60,
        )


async def until(done: Callable[[], bool]) -> None:
    """Poll `done` (30 s at most): the database and the log signal nothing."""

    async def poll() -> None:
        while not done():  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout=30)


async def until_finished(engine: Engine, count: int) -> None:
    """Wait until `count` debates are stored as finished."""

    def finished() -> int:
        with Session(engine) as session:
            return queue.count_debates(session, state=DebateState.FINISHED)

    await until(lambda: finished() >= count)


def lease_ended(engine: Engine, debate_id: int) -> None:
    """The debate's lease runs out now (as it would later), so a claim takes it."""
    with Session(engine) as session:
        session.execute(
            update(Debate).where(col(Debate.id) == debate_id).values(lease_expires_at=utcnow())
        )
        session.commit()


def verdict_already_stored(engine: Engine, debate_id: int) -> None:
    """A verdict stored earlier (as by a run that lost the race): the unique key refuses the
    debate's next one."""
    with Session(engine) as session:
        session.add(
            VerdictRecord(
                debate_id=debate_id,
                status=DebateStatus.COMPLETE,
                decision=Decision.ACCEPT,
                confidence=0.9,
                level=ConfidenceLevel.HIGH,
                escalate=False,
                synthesis="earlier",
                result_json="{}",
            )
        )
        session.commit()


def verified(engine: Engine, debate_id: int) -> int:
    with Session(engine) as session:
        report = verify.verify_chain(session, debate_id=debate_id)
    assert report.ok, report.problem
    return report.turns_checked


async def test_turns_of_many_debates_arriving_together_share_commits(store: Engine) -> None:
    ids = claimed(store, 30)
    writer = TurnWriter(store)
    seen = commits(store)

    async def debate(debate_id: int) -> ChainHead:
        head = ChainHead()
        for index in range(4):
            head = await writer.append(TurnWrite(debate_id, "w1", turn(index), head))
        return head

    heads = await asyncio.gather(*(debate(i) for i in ids))

    assert [head.seq for head in heads] == [3] * 30
    assert len(seen) < 30 * 4 / 3, f"{len(seen)} commits for 120 turns"
    assert all(verified(store, debate_id) == 4 for debate_id in ids)


def test_on_postgresql_batches_of_any_size_send_one_statement_text(postgres_url: str) -> None:
    """A batch's reads take its ids as one array, so every batch size sends the same SQL, which
    psycopg converts once and prepares, and the server plans once."""
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    ids = claimed(engine, 6)
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    for batch in ([ids[0]], ids[1:3], ids[3:]):
        with Session(engine) as session:
            writes = [TurnWrite(debate_id, "w1", turn(0), ChainHead()) for debate_id in batch]
            heads = turns.append_turns(session, writes=writes)
        assert [head.seq for head in heads] == [0] * len(batch)  # type: ignore[union-attr]
        with Session(engine) as session:
            runs = turns.stored_runs(session, debate_ids=batch)
        assert sorted(runs) == sorted(batch)
    leases = {sql for sql in sent if "lease_owner" in sql and "FOR UPDATE" in sql}
    reads = {sql for sql in sent if sql.startswith("SELECT turn.")}
    assert len(leases) == 1, leases
    assert len(reads) == 1, reads
    assert "ANY" in leases.pop()
    engine.dispose()


def test_a_refused_write_in_a_batch_fails_alone(store: Engine) -> None:
    first, second, third = claimed(store, 3)
    with Session(store) as session:
        (head,) = turns.append_turns(
            session, writes=[TurnWrite(second, "w1", turn(0), ChainHead())]
        )
    assert isinstance(head, ChainHead)

    with Session(store) as session:
        outcomes = turns.append_turns(
            session,
            writes=[
                TurnWrite(first, "w1", turn(0), ChainHead()),
                # A stale head: seq 0 is taken, so the unique key refuses it.
                TurnWrite(second, "w1", turn(1), ChainHead()),
                TurnWrite(third, "someone-else", turn(0), ChainHead()),
            ],
        )

    assert isinstance(outcomes[0], ChainHead)
    assert isinstance(outcomes[1], StoreRefusedError)
    assert "not stored twice" in str(outcomes[1])
    assert isinstance(outcomes[2], LeaseLostError)
    assert verified(store, first) == 1
    assert verified(store, second) == 1
    with Session(store) as session:
        assert turns.chain_head(session, debate_id=third) == ChainHead()


def refuse_at_begin(*_args: object) -> None:
    raise DatabaseUnavailableError("database down (test)")


def refuse_the_lease_check(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
    if sql.startswith("SELECT debate.id, debate.lease_owner, debate.halt_reason"):
        raise OperationalError(sql, {}, Exception("disk I/O error"))


@pytest.mark.parametrize(
    ("name", "fault"),
    [("begin", refuse_at_begin), ("before_cursor_execute", refuse_the_lease_check)],
    ids=["at-begin", "at-the-lease-check"],
)
async def test_a_database_failure_reaches_every_waiting_turn(
    store: Engine, name: str, fault: Callable[..., None]
) -> None:
    ids = claimed(store, 3)
    writer = TurnWriter(store)

    with failing(store, fault, name):
        outcomes = await asyncio.gather(
            *(writer.append(TurnWrite(i, "w1", turn(0), ChainHead())) for i in ids),
            return_exceptions=True,
        )

    assert all(isinstance(outcome, DatabaseUnavailableError) for outcome in outcomes), outcomes
    head = await writer.append(TurnWrite(ids[0], "w1", turn(0), ChainHead()))
    assert head.seq == 0


def test_batch_claims_take_each_debate_once(store: Engine) -> None:
    ids = queued(store, 7)
    with Session(store, expire_on_commit=False) as session:
        first = queue.claim_debates(session, worker_id="a", lease_s=600, limit=4)
        second = queue.claim_debates(session, worker_id="b", lease_s=600, limit=4)
        third = queue.claim_debates(session, worker_id="c", lease_s=600, limit=4)

    assert [d.id for d in first] == ids[:4]
    assert [d.id for d in second] == ids[4:]
    assert third == []
    assert {d.lease_owner for d in first} == {"a"}
    assert all(d.state == DebateState.RUNNING and d.claims == 1 for d in [*first, *second])


async def test_one_worker_runs_many_debates_at_once_and_stops_when_idle(store: Engine) -> None:
    ids = queued(store, 12)
    worker = pool_worker(store)

    await asyncio.wait_for(
        worker.run_pool(asyncio.Event(), concurrency=5, exit_when_idle=True), timeout=60
    )

    with Session(store) as session:
        assert queue.count_debates(session, state=DebateState.FINISHED) == 12
    assert all(verified(store, debate_id) == TURNS for debate_id in ids)


async def test_once_the_queue_is_empty_endings_do_not_each_claim_again(
    store: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued(store, 12)
    claims: list[int] = []
    claim = queue.claim_debates

    def counted(session: Session, **kwargs: Any) -> list[Debate]:
        taken = claim(session, **kwargs)
        claims.append(len(taken))
        return taken

    monkeypatch.setattr(queue, "claim_debates", counted)
    # The moderators answer 0.05 s apart, so the endings land one by one.
    delays = iter(range(12))

    async def moderator(_request: object) -> dict[str, object]:
        await asyncio.sleep(0.05 * next(delays))
        return reply_for("moderator")

    worker = pool_worker(store, DebateScript(moderator=[moderator]).llm(), poll_s=60.0)

    await asyncio.wait_for(
        worker.run_pool(asyncio.Event(), concurrency=12, exit_when_idle=True), timeout=30
    )

    with Session(store) as session:
        assert queue.count_debates(session, state=DebateState.FINISHED) == 12
    # All twelve at once; after the first ending, one claim finds the queue empty; the pool
    # then waits for the last ending (not the 60 s poll), claims once more and exits. Not a
    # claim after each of the twelve endings.
    assert claims == [12, 0, 0]


async def test_a_debate_queued_while_the_queue_was_empty_is_taken_at_the_next_poll(
    store: Engine,
) -> None:
    queued(store, 1)
    slow = DebateScript(framing=[lambda _r: asyncio.sleep(1.0, reply_for("framing"))])
    worker = pool_worker(store, slow.llm())
    stop = asyncio.Event()
    pool = asyncio.create_task(worker.run_pool(stop, concurrency=2))
    await asyncio.sleep(0.3)
    with Session(store) as session:
        late, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="late", spec=SPEC, source=DebateSource.COMMAND)
        )
        assert late.id is not None
        assert queue.get_debate(session, debate_id=late.id).state == DebateState.QUEUED
    await asyncio.sleep(0.3)
    with Session(store) as session:
        assert queue.get_debate(session, debate_id=late.id).lease_owner == "pool", (
            "taken while the first debate still waits on its model"
        )
    stop.set()
    await asyncio.wait_for(pool, timeout=30)


@pytest.mark.parametrize(
    "waves", [(25, 0.01), (1, 600.0)], ids=["all-started", "two-waiting-for-their-wave"]
)
async def test_a_cancelled_pool_hands_every_lease_back(
    store: Engine, waves: tuple[int, float]
) -> None:
    queued(store, 3)
    started = asyncio.Event()

    async def slow(_request: object) -> str:
        started.set()
        await asyncio.sleep(30)
        return "{}"

    llm = DebateScript(framing=[slow, slow, slow]).llm()
    worker = pool_worker(store, llm, waves=waves)
    pool = asyncio.create_task(worker.run_pool(asyncio.Event(), concurrency=3))
    await asyncio.wait_for(started.wait(), timeout=10)
    await asyncio.sleep(0.2)
    pool.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pool

    with Session(store) as session:
        taken = queue.claim_debates(session, worker_id="next", lease_s=600, limit=3)
    assert len(taken) == 3, "every lease was handed back, so the debates are claimable now"


def test_a_claim_starts_in_waves_and_a_single_debate_at_once() -> None:
    assert start_delays(5, 2, 0.01) == [0.0, 0.0, 0.01, 0.01, 0.02]
    assert start_delays(1, 25, 0.01) == [0.0]
    assert start_delays(3, 0, 0.5) == [0.0, 0.5, 1.0], "a wave holds at least one debate"


async def stop_after_the_first_wave(
    engine: Engine,
    count: int,
    wave: int,
    stopping: contextlib.AbstractContextManager[object] | None = None,
) -> tuple[list[int], FunctionLLM]:
    """Queue `count` debates, run a pool starting them `wave` at a time with the next wave 600 s
    away, and stop it once the first wave finished, inside `stopping` (a fault) when given; the
    debates' ids and the model."""
    ids = queued(engine, count)
    llm = DebateScript().llm()
    worker = pool_worker(engine, llm, waves=(wave, 600.0))
    stop = asyncio.Event()
    pool = asyncio.create_task(worker.run_pool(stop, concurrency=count))
    await until_finished(engine, wave)
    with stopping or contextlib.nullcontext():
        stop.set()
        await asyncio.wait_for(pool, timeout=10)
    return ids, llm


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process's transaction holds the SQLite file's write lock while the block runs."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.rollback()
        holder.close()


async def test_debates_claimed_together_start_in_waves_and_a_stop_hands_back_those_waiting(
    store: Engine,
) -> None:
    ids, llm = await stop_after_the_first_wave(store, 5, 2)

    assert len(llm.calls) == 2 * TURNS, "only the first wave (two debates) called the model"
    with Session(store) as session:
        states = {i: queue.get_debate(session, debate_id=i).state for i in ids}
        assert [states[i] for i in ids] == [DebateState.FINISHED] * 2 + [DebateState.RUNNING] * 3
        assert all(not turns.turn_rows(session, debate_id=i) for i in ids[2:])
        taken = queue.claim_debates(session, worker_id="next", lease_s=600, limit=5)
    assert sorted(d.id for d in taken if d.id is not None) == ids[2:], (
        "the waiting debates were handed back at once"
    )


def refuse_the_hand_back(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
    if sql.startswith("UPDATE debate SET lease_expires_at"):
        raise OperationalError(sql, {}, Exception("disk I/O error"))


async def test_a_hand_back_the_database_fails_leaves_the_waiting_debate_to_its_lease(
    store: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    ids, llm = await stop_after_the_first_wave(store, 3, 1, failing(store, refuse_the_hand_back))

    assert len(llm.calls) == TURNS, "the waiting debates made no model call"
    for debate_id in ids[1:]:
        assert f"debate {debate_id}: lease not handed back (database" in caplog.text
    assert "it expires" in caplog.text
    with Session(store) as session:
        assert queue.claim_debates(session, worker_id="next", lease_s=600, limit=3) == [], (
            "still leased: another worker takes them when the lease ends"
        )
        assert all(not turns.turn_rows(session, debate_id=i) for i in ids[1:])


async def test_a_hand_back_that_waits_on_a_locked_database_gives_up_at_its_busy_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "locked.sqlite3"
    upgrade(f"sqlite:///{path}")
    engine = make_engine(f"sqlite:///{path}", busy_timeout_s=0.2)
    try:
        ids, llm = await stop_after_the_first_wave(engine, 3, 1, write_locked(path))
        with Session(engine) as session:
            taken = queue.claim_debates(session, worker_id="next", lease_s=600, limit=3)
    finally:
        engine.dispose()

    assert len(llm.calls) == TURNS, "the waiting debates made no model call"
    for debate_id in ids[1:]:
        assert (
            f"debate {debate_id}: lease not handed back (database sqlite:///{path} unavailable"
            " (database is locked): another process holds the SQLite write lock" in caplog.text
        )
    assert taken == [], "still leased: another worker takes them when the lease ends"


async def test_a_stopped_pool_lets_each_turn_in_flight_finish_then_hands_leases_back(
    store: Engine,
) -> None:
    ids = queued(store, 3)
    in_flight = asyncio.Event()
    release = asyncio.Event()

    async def framing(request: LLMRequest) -> dict[str, object]:
        in_flight.set()
        await release.wait()
        return reply_for("framing")

    llm = DebateScript(framing=[framing]).llm()
    worker = pool_worker(store, llm)
    stop = asyncio.Event()
    pool = asyncio.create_task(worker.run_pool(stop, concurrency=3))
    await asyncio.wait_for(in_flight.wait(), timeout=10)
    await until(lambda: len(llm.calls) >= 3)
    stop.set()
    await asyncio.sleep(0.1)
    assert not pool.done(), "the turns in flight are waited for"
    release.set()
    await asyncio.wait_for(pool, timeout=10)

    assert len(llm.calls) == 3, "no model call starts once the pool is stopping"
    with Session(store) as session:
        for debate_id in ids:
            assert len(turns.turn_rows(session, debate_id=debate_id)) == 1
        taken = queue.claim_debates(session, worker_id="next", lease_s=600, limit=3)
    assert len(taken) == 3, "each debate was handed back after its turn was stored"


async def test_endings_of_many_debates_share_commits_and_refused_ones_fail_alone(
    store: Engine,
) -> None:
    ids = claimed(store, 6)
    llm = DebateScript().llm()
    result = await run_debate(SPEC, resolve_llm=lambda _m: llm, prompts=shipped_prompts())
    verdict_already_stored(store, ids[4])
    writer = FinishWriter(store)
    seen = commits(store)

    outcomes = await asyncio.gather(
        *(
            writer.finish(endings.Finish(i, "w1" if i != ids[2] else "intruder", result))
            for i in ids
        ),
        return_exceptions=True,
    )

    assert isinstance(outcomes[2], LeaseLostError)
    assert isinstance(outcomes[4], StoreRefusedError)
    assert "already has a verdict" in str(outcomes[4])
    assert all(isinstance(o, endings.Sealed) for n, o in enumerate(outcomes) if n not in (2, 4))
    assert len(seen) < 6, f"{len(seen)} commits for 6 endings"
    with Session(store) as session:
        states = [queue.get_debate(session, debate_id=i).state for i in ids]
    finished, running = DebateState.FINISHED, DebateState.RUNNING
    assert states == [finished, finished, running, finished, running, finished]
    assert all(verified(store, i) == 0 for n, i in enumerate(ids) if n not in (2, 4))


async def test_a_pool_waits_out_a_database_outage_and_then_runs_everything(store: Engine) -> None:
    ids = queued(store, 4)
    worker = pool_worker(store)
    failures = {"left": 2}

    def down_for_a_while(*_args: object) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise DatabaseUnavailableError("database down (test)")

    await run_pool_while(store, worker, "begin", down_for_a_while, concurrency=4)

    assert failures["left"] == 0, "the claims met the outage"
    with Session(store) as session:
        assert queue.count_debates(session, state=DebateState.FINISHED) == 4
    assert all(verified(store, debate_id) == TURNS for debate_id in ids)


async def test_a_failed_batch_read_leaves_each_debate_to_read_its_own(store: Engine) -> None:
    queued(store, 3)
    llm = DebateScript().llm()
    worker = pool_worker(store, llm)
    claimed_now = await worker.claim_many(3)
    failed: list[str] = []

    def fail_the_batch_read(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if "FROM turn" in statement and not failed:
            failed.append(statement)
            raise DatabaseUnavailableError("database down (test)")

    with failing(store, fail_the_batch_read):
        stored = await worker._stored(claimed_now)
    assert failed
    assert stored == {}

    results = await asyncio.gather(*(worker.execute(debate) for debate in claimed_now))
    assert all(result is not None for result in results)


async def test_a_run_that_lost_its_lease_stops_and_is_counted(store: Engine) -> None:
    [debate_id] = queued(store, 1)
    taken = asyncio.Event()

    async def framing(request: LLMRequest) -> dict[str, object]:
        await taken.wait()
        return reply_for("framing")

    llm = DebateScript(framing=[framing]).llm()
    metrics = Metrics()
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _s: llm,
        prompts=shipped_prompts(),
        worker_id="slow",
        config=WorkerConfig(lease_s=0.2, heartbeat_s=30),
        metrics=metrics,
    )
    [claimed] = await worker.claim_many(1)
    running = asyncio.create_task(worker.execute(claimed))
    await asyncio.sleep(0.4)
    with Session(store, expire_on_commit=False) as session:
        [stolen] = queue.claim_debates(session, worker_id="other", lease_s=600, limit=1)
    assert stolen.id == debate_id
    taken.set()

    assert await running is None
    assert metrics.registry.get_sample_value("debatebot_lease_losses_total") == 1
    with Session(store) as session:
        assert turns.turn_rows(session, debate_id=debate_id) == []


async def test_claiming_one_debate_brings_its_stored_turns_and_refuses_a_held_one(
    store: Engine,
) -> None:
    resumed, held = queued(store, 2)
    with Session(store, expire_on_commit=False) as session:
        for debate_id, owner in ((resumed, "crashed"), (held, "other")):
            queue.claim_debates(session, worker_id=owner, lease_s=600, debate_id=debate_id)
    head = await TurnWriter(store).append(TurnWrite(resumed, "crashed", turn(0), ChainHead()))
    lease_ended(store, resumed)
    worker = pool_worker(store)

    taken = await worker.claim_with_run(resumed)

    assert taken is not None
    debate, (turns, chain) = taken
    assert debate.id == resumed
    assert debate.lease_owner == "pool"
    assert [t.key for t in turns] == [turn(0).key]
    assert chain == head
    assert await worker.claim_with_run(held) is None


@pytest.mark.parametrize("refused", [False, True], ids=["together", "one-by-one"])
async def test_escalating_endings_written_in_a_batch_carry_their_escalation_and_review_request(
    store: Engine, refused: bool
) -> None:
    """The invariant the Core statements must keep, on both the batch path and the fallback
    after a refused ending: an escalating verdict has its escalation row, and the messages it
    owes (rendered from the stored debate and escalation) name that escalation."""
    ids = claimed(store, 4)
    llm = DebateScript(moderator=[reply_for("moderator", decision="escalate")]).llm()
    result = await run_debate(SPEC, resolve_llm=lambda _m: llm, prompts=shipped_prompts())
    assert result.verdict.escalate
    if refused:
        verdict_already_stored(store, ids[0])

    with Session(store) as session:
        # The ending owes messages only to a debate with a channel.
        for debate_id in ids:
            queue.get_debate(session, debate_id=debate_id).channel_id = "C1"
        session.commit()
    writer = FinishWriter(store)
    outcomes = await asyncio.gather(
        *(writer.finish(endings.Finish(i, "w1", result, owes_messages=True)) for i in ids),
        return_exceptions=True,
    )

    finished = ids[1:] if refused else ids
    assert isinstance(outcomes[0], StoreRefusedError) == refused
    with Session(store) as session:
        for debate_id in finished:
            escalation = reviews.escalation_for(session, debate_id=debate_id)
            assert escalation is not None
            rows = {row.key: row for row in outbox.rows_of(session, debate_id=debate_id)}
            debate = queue.get_debate(session, debate_id=debate_id)
            assert debate.chain_head is not None
            assert f"review:{escalation.id}" in str(rows["review"].blocks)
            assert debate.chain_head[:12] in str(rows["verdict"].blocks)
        if refused:
            assert reviews.escalation_for(session, debate_id=ids[0]) is None
            assert outbox.rows_of(session, debate_id=ids[0]) == []


async def test_escalations_written_in_a_batch_take_their_reviewers_channel_and_keep_one_row(
    store: Engine,
) -> None:
    """A batch of escalating endings reads, in one statement, the reviewers of the channel the
    server chose for each debate (`reviewers_channel_id`: its own channel, or the deployment's
    review channel for a DM) and the escalation it may already have: the new rows carry the
    right reviewers, a review channel the requester named does not choose them, and a debate
    escalated before keeps its one row."""
    with Session(store) as session:
        for channel, channel_reviewers in (("C1", ["U1"]), ("CREV", ["UREV", "UREV2"])):
            session.add(ChannelSettings(channel_id=channel, reviewers=channel_reviewers))
        session.commit()
    own, from_dm, named, earlier, nowhere = claimed(store, 5)
    with Session(store) as session:
        for debate_id, values in (
            (own, {"channel_id": "C1", "reviewers_channel_id": "C1"}),
            (
                from_dm,
                {"channel_id": "D1", "review_channel_id": "CREV", "reviewers_channel_id": "CREV"},
            ),
            (
                named,
                {"channel_id": "C1", "review_channel_id": "CREV", "reviewers_channel_id": "C1"},
            ),
            (
                earlier,
                {"channel_id": "C1", "review_channel_id": "CREV", "reviewers_channel_id": "CREV"},
            ),
        ):
            session.execute(update(Debate).where(col(Debate.id) == debate_id).values(**values))
        session.add(Escalation(debate_id=earlier, reasons=["before"], reviewers=["UOLD"]))
        session.commit()
    llm = DebateScript(moderator=[reply_for("moderator", decision="escalate")]).llm()
    result = await run_debate(SPEC, resolve_llm=lambda _m: llm, prompts=shipped_prompts())
    assert result.verdict.escalate

    writer = FinishWriter(store)
    ids = (own, from_dm, named, earlier, nowhere)
    finishes = [endings.Finish(i, "w1", result) for i in ids]
    await asyncio.gather(*(writer.finish(finish) for finish in finishes))

    with Session(store) as session:
        reviewers = {
            debate_id: reviews.escalation_for(session, debate_id=debate_id).reviewers  # type: ignore[union-attr]
            for debate_id in ids
        }
        rows = session.exec(select(Escalation).where(Escalation.debate_id == earlier)).all()
    assert reviewers == {
        own: ["U1"],
        from_dm: ["UREV", "UREV2"],
        named: ["U1"],
        earlier: ["UOLD"],
        nowhere: [],
    }
    assert len(rows) == 1


async def test_a_turn_write_brings_back_the_halt_reason_the_delivery_recorded(
    store: Engine,
) -> None:
    """The worker checks a Slack debate's halt before each model call from its last write, so
    the write must carry a halt recorded meanwhile (the thread became unreachable)."""
    [debate_id] = claimed(store, 1)
    writer = TurnWriter(store)
    head = await writer.append(TurnWrite(debate_id, "w1", turn(0), ChainHead()))
    assert head.halt_reason is None
    with Session(store) as session:
        assert outbox_deliveries.halt(
            session, debate_id=debate_id, reason="not_in_channel", notices=[]
        )

    head = await writer.append(TurnWrite(debate_id, "w1", turn(1), head))

    assert head.halt_reason == "not_in_channel"
    assert head.seq == 1


@pytest.mark.parametrize(
    "statement",
    ["SELECT debate.id, debate.lease_owner, debate.state", "INSERT INTO verdict"],
    ids=["at-the-batch-read", "at-the-verdict-insert"],
)
async def test_an_ending_the_database_fails_is_finished_by_the_next_claim_without_asking_again(
    store: Engine, caplog: pytest.LogCaptureFixture, statement: str
) -> None:
    """The database failing the endings' batch (a disk I/O error, a dropped server) at its one
    read or at its writes: the run logs why and stops; every turn it paid for stays stored, and
    the claim after its lease ends replays them and records the ending without a model call."""
    [debate_id] = queued(store, 1)
    llm = DebateScript().llm()
    worker = pool_worker(store, llm)
    failed: list[str] = []

    def fail_the_ending(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if sql.startswith(statement) and not failed:
            failed.append(sql)
            raise OperationalError(sql, {}, Exception("disk I/O error"))

    await run_pool_while(store, worker, "before_cursor_execute", fail_the_ending, concurrency=2)

    assert failed
    assert "stopped by a database outage (database" in caplog.text
    assert "disk I/O error" in caplog.text
    asked = len(llm.calls)
    with Session(store) as session:
        assert queue.get_debate(session, debate_id=debate_id).state == DebateState.RUNNING
        assert endings.verdict_for(session, debate_id=debate_id) is None
    lease_ended(store, debate_id)

    await asyncio.wait_for(
        worker.run_pool(asyncio.Event(), concurrency=2, exit_when_idle=True), timeout=60
    )

    assert len(llm.calls) == asked == TURNS
    with Session(store) as session:
        assert queue.get_debate(session, debate_id=debate_id).state == DebateState.FINISHED
    assert verified(store, debate_id) == TURNS
