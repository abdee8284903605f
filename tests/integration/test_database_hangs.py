"""A database that hangs never hangs the bot: every wait on it has a bound (`make_engine`).

- PostgreSQL: a row lock another transaction holds past `lock_timeout`, and a statement past
  `statement_timeout`, are cancelled by the server and reported with what to look for.
- A server (or a network) that stops answering without closing the connection, here a real
  PostgreSQL behind a proxy that stops passing bytes, is given up at the store's deadline; so is
  a statement stuck in either backend.
- The debate that was running stops with the reason in the log, keeps every turn that was
  stored, and finishes when it is claimed again once the database answers.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from bot.health import HealthProbe
from bot.jobs.worker import DebateWorker
from bot.settings import Settings
from bot.store import queue, turns
from bot.store.db import POSTGRES_STORE_THREADS, in_session, make_engine
from bot.store.debate_tables import DebateSource, DebateState
from bot.store.errors import DatabaseUnavailableError, StoreNoAnswerError
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import open_store
from engine.llm import LLMRequest
from engine.providers.fake import FunctionLLM
from tests.helpers import DebateScript, reply_for
from tests.integration.stalling_proxy import StallingProxy
from tests.integration.test_group_commit import (
    SPEC,
    failing,
    lease_ended,
    pool_worker,
    queued,
    until,
    verified,
)
from tests.migrated import upgrade

BUSY_S = 0.5
"""The engines' busy timeout here: lock timeout 0.5 s, statement timeout 1 s, deadline 1.5 s."""


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[StallingProxy]:
    """A stalling proxy in front of the test's PostgreSQL server."""
    parsed = make_url(postgres_url)
    proxy = StallingProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
    yield proxy
    proxy.close()


async def until_logged(caplog: pytest.LogCaptureFixture, wanted: str, times: int = 1) -> None:
    await until(lambda: caplog.text.count(wanted) >= times)


async def run_until_logged(
    worker: DebateWorker, caplog: pytest.LogCaptureFixture, wanted: str
) -> None:
    """Run `worker`'s pool until `wanted` is logged, then stop it."""
    stop = asyncio.Event()
    pool = asyncio.create_task(worker.run_pool(stop, concurrency=2))
    try:
        await until_logged(caplog, wanted)
    finally:
        stop.set()
        await asyncio.wait_for(pool, timeout=30)


async def claimed_again(engine: Engine, debate_id: int, llm: FunctionLLM) -> None:
    """Once the debate's lease ends (here at once, as a minute later), a worker on `llm` claims
    it and runs it to its end."""
    lease_ended(engine, debate_id)
    await asyncio.wait_for(
        pool_worker(engine, llm).run_pool(asyncio.Event(), concurrency=2, exit_when_idle=True),
        timeout=60,
    )


def stored_roles(engine: Engine, debate_id: int) -> list[str]:
    with Session(engine) as session:
        return [t.role.value for t in turns.stored_turns(session, debate_id=debate_id)]


def state(engine: Engine, debate_id: int) -> DebateState:
    with Session(engine) as session:
        return queue.get_debate(session, debate_id=debate_id).state


async def test_a_row_lock_held_elsewhere_is_given_up_at_the_lock_timeout(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another session holds the debate's row (a transaction left open) while the critic's
    turn is written: the write gives up at the lock timeout and the operator is told to look for
    that session; once it is gone the debate finishes, its critic asked once more."""
    upgrade(postgres_url)
    engine = make_engine(postgres_url, busy_timeout_s=BUSY_S)
    holder = create_engine(postgres_url)
    other = holder.connect()
    [debate_id] = queued(engine, 1)

    def lock_then_answer(_request: LLMRequest) -> dict[str, Any]:
        other.execute(text("SELECT id FROM debate WHERE id = :id FOR UPDATE"), {"id": debate_id})
        return reply_for("critic")

    try:
        llm = DebateScript(critic=[lock_then_answer, reply_for("critic")]).llm()
        await run_until_logged(pool_worker(engine, llm), caplog, "stopped by a database outage")
        assert "canceling statement due to lock timeout" in caplog.text
        assert "another transaction held a lock this one needed" in caplog.text
        assert "find it in pg_stat_activity" in caplog.text
        assert state(engine, debate_id) == DebateState.RUNNING
        assert stored_roles(engine, debate_id) == ["framing", "proposer"]
    finally:
        other.rollback()
        other.close()
        holder.dispose()

    resumed = DebateScript().llm()
    await claimed_again(engine, debate_id, resumed)

    assert state(engine, debate_id) == DebateState.FINISHED
    assert [c.schema_name for c in resumed.calls] == [
        "CriticTurn",
        "RebuttalTurn",
        "ModeratorTurn",
        "IndependentJudgment",
    ]
    assert verified(engine, debate_id) == 6
    engine.dispose()


async def test_a_statement_past_the_statement_timeout_is_cancelled_and_reported(
    postgres_url: str,
) -> None:
    upgrade(postgres_url)
    engine = make_engine(postgres_url, busy_timeout_s=BUSY_S)

    with pytest.raises(DatabaseUnavailableError) as raised:
        await in_session(
            engine, lambda s: s.execute(text("SELECT pg_sleep(5)")), workspace=PENDING_WORKSPACE
        )

    assert "canceling statement due to statement timeout" in str(raised.value)
    assert "the server is overloaded or waiting on its disk" in str(raised.value)
    assert (
        await in_session(
            engine, lambda s: s.execute(text("SELECT 1")).scalar(), workspace=PENDING_WORKSPACE
        )
        == 1
    )
    engine.dispose()


def test_migrations_have_no_statement_timeout(postgres_url: str) -> None:
    """A migration may rewrite a large table: only the bot's own statements are bounded."""
    migrating, serving = make_engine(postgres_url, create=True), make_engine(postgres_url)
    with migrating.connect() as connection:
        assert connection.execute(text("SHOW statement_timeout")).scalar() == "0"
        assert connection.execute(text("SHOW lock_timeout")).scalar() == "10s"
    with serving.connect() as connection:
        assert connection.execute(text("SHOW statement_timeout")).scalar() == "20s"
    migrating.dispose()
    serving.dispose()


async def test_a_server_that_stops_answering_is_given_up_at_the_deadline(
    postgres_url: str, proxy: StallingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """The server stops answering (nothing closes the connection, so neither it nor the
    operating system reports anything) while the critic's turn is being stored: the run stops
    at the store's deadline and says so; when the server answers again the stuck write ends,
    and the debate is claimed again and finishes with no turn asked twice."""
    upgrade(postgres_url)
    engine = make_engine(
        make_url(postgres_url).set(port=proxy.port).render_as_string(hide_password=False),
        busy_timeout_s=BUSY_S,
    )
    direct = make_engine(postgres_url)
    [debate_id] = queued(engine, 1)

    def stall_then_answer(_request: LLMRequest) -> dict[str, Any]:
        proxy.stall()
        return reply_for("critic")

    caplog.set_level(logging.INFO)
    llm = DebateScript(critic=[stall_then_answer, reply_for("critic")]).llm()
    await run_until_logged(pool_worker(engine, llm), caplog, "stopped by a database outage")

    assert "unavailable (no answer within 1.5 s)" in caplog.text
    assert "check the server and the network" in caplog.text
    assert stored_roles(direct, debate_id) == ["framing", "proposer"]
    proxy.resume()
    await until_logged(caplog, "a store call given up at its deadline ended later")
    await until(lambda: len(stored_roles(direct, debate_id)) == 3)
    assert state(direct, debate_id) == DebateState.RUNNING

    resumed = DebateScript().llm()
    await claimed_again(engine, debate_id, resumed)

    assert state(direct, debate_id) == DebateState.FINISHED
    assert [c.schema_name for c in llm.calls + resumed.calls] == [
        "Proposition",
        "ProposerTurn",
        "CriticTurn",
        "RebuttalTurn",
        "ModeratorTurn",
        "IndependentJudgment",
    ]
    assert verified(direct, debate_id) == 6
    engine.dispose()
    direct.dispose()


async def test_a_statement_stuck_in_the_database_is_given_up_at_the_deadline(
    store: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """On either backend: statements that do not return (a disk or a server that froze) hold
    every store thread; each call is given up at the deadline with a StoreNoAnswerError (an
    outage to its callers), the one queued behind them too, and that one never runs later (a
    debate queued minutes after its caller was told it failed would surprise everyone). The
    threads end when their statements do (here failing): a warning each, no error left for the
    event loop to report, and the store answers again."""
    engine = make_engine(store.url.render_as_string(hide_password=False), busy_timeout_s=0.2)
    threads = 1 if engine.dialect.name == "sqlite" else POSTGRES_STORE_THREADS
    released = threading.Event()

    def stuck(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if "count(" in sql:
            released.wait(30)
            raise OperationalError(sql, {}, Exception("server closed the connection"))

    def enqueue(session: Session) -> None:
        queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="late", spec=SPEC, source=DebateSource.COMMAND)
        )

    with failing(engine, stuck):
        counts = [
            in_session(engine, lambda s: queue.count_debates(s), workspace=PENDING_WORKSPACE)
            for _ in range(threads)
        ]
        outcomes = await asyncio.gather(
            *counts,
            in_session(engine, enqueue, workspace=PENDING_WORKSPACE),
            return_exceptions=True,
        )
        kinds, said = {type(outcome) for outcome in outcomes}, str(outcomes[-1])
        del outcomes  # their tracebacks hold the calls' frames, which the collection must free
        released.set()
        await until_logged(caplog, "given up at its deadline failed later", times=threads)
        await asyncio.sleep(0.05)
        gc.collect()

    assert kinds == {StoreNoAnswerError}
    assert issubclass(StoreNoAnswerError, DatabaseUnavailableError)
    assert "unavailable (no answer within 0.6 s)" in said
    assert "server closed the connection" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (
        await in_session(engine, lambda s: queue.count_debates(s), workspace=PENDING_WORKSPACE) == 0
    )
    engine.dispose()


def test_the_bot_s_engine_takes_its_bounds_from_the_timeout_setting(postgres_url: str) -> None:
    upgrade(postgres_url)
    settings = Settings(database_url=postgres_url, database_timeout_s=0.4)

    with open_store(settings) as engine, engine.connect() as connection:
        assert connection.execute(text("SHOW lock_timeout")).scalar() == "400ms"
        assert connection.execute(text("SHOW statement_timeout")).scalar() == "800ms"
        assert (
            connection.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"
        )
        # Client side, a host gone without closing the connection: closed after the deadline.
        dbapi = connection.connection.dbapi_connection
        assert dbapi is not None
        libpq = dbapi.pgconn.info
        options = {option.keyword: option.val for option in libpq}
        assert options[b"tcp_user_timeout"] == b"1200"
        assert options[b"keepalives"] == b"1"


async def test_healthz_answers_unavailable_in_time_while_the_database_hangs(
    store: Engine,
) -> None:
    """`/healthz`'s check while the schema read hangs: each probe answers `unavailable` within
    its bound (under the image's 4-second probe), and probes during the hang share the one
    stuck check rather than each leaving a thread stuck; once the database answers, `ok`."""
    probe = HealthProbe(store, 4, timeout_s=0.3)
    released, entered = threading.Event(), []

    def stuck(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if "alembic_version" in sql and not released.is_set():
            entered.append(sql)
            released.wait(30)

    with failing(store, stuck):
        first, second = await probe(), await probe()
        released.set()
        after = await probe()

    assert first == second == {"ok": False, "database": "unavailable", "concurrency": 4}
    assert len(entered) == 1
    assert after == {"ok": True, "database": "ok", "concurrency": 4}
