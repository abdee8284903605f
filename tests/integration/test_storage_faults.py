"""Storage faults never eat data: a SQLite file deleted under a running bot is reported, never
silently re-created; a read-only file is reported as read-only with the right advice; data a
database refuses becomes a clear error; and `/healthz` says which, without naming the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine, create_engine, event, text, update
from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

from bot.health import HealthProbe
from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
from bot.jobs.pause import OutagePause
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.store import queue
from bot.store.db import check_schema, make_engine, session_scope, upgrade
from bot.store.errors import (
    DatabaseUnavailableError,
    SchemaOutdatedError,
    StoreReadOnlyError,
    StoreRefusedError,
)
from bot.store.tables import Debate, DebateSource
from bot.store.tenancy import PENDING_WORKSPACE
from engine.models import DebateSpec, ModelSettings
from tests.e2e.test_serve import free_port

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


def enqueue(engine: Engine, key: str) -> None:
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key=key, spec=SPEC, source=DebateSource.COMMAND)
        )


def sqlite_with_a_debate(tmp_path: Path, folder: str) -> tuple[Path, str, Engine]:
    """A migrated SQLite file in `folder` holding one queued debate ("before"): its path, URL
    and an engine on it."""
    path = tmp_path / folder / "bot.sqlite3"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    enqueue(engine, "before")
    return path, url, engine


async def test_a_deleted_sqlite_file_is_reported_and_never_recreated(tmp_path: Path) -> None:
    path, url, engine = sqlite_with_a_debate(tmp_path, "data")
    assert await HealthProbe(engine, 1)() == {"ok": True, "database": "ok", "concurrency": 1}

    for leftover in path.parent.iterdir():
        leftover.unlink()
    path.parent.rmdir()

    with pytest.raises(DatabaseUnavailableError, match="does not exist") as raised:
        enqueue(engine, "after")
    assert "restore it from a backup" in str(raised.value)
    assert not path.exists(), "no empty database was created in its place"
    assert await HealthProbe(engine, 1)() == {"ok": False, "database": "missing", "concurrency": 1}
    engine.dispose()
    fresh = make_engine(url)
    with pytest.raises(SchemaOutdatedError, match="does not exist"):
        check_schema(fresh)
    fresh.dispose()
    assert not path.exists()


DEBATEBOT = str(Path(sys.executable).with_name("debatebot"))
STARTS = {
    "run": ["run", "Should we adopt ADR-042?", "--provider", "fake"],
    "worker": ["worker", "--exit-when-idle"],
    "serve": ["serve"],
}


def start(command: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`debatebot <command>` as an operator starts it, on the database at `url`; a command
    that starts serving is stopped after a while and counts as started."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env |= {
        "DEBATEBOT_DATABASE_URL": url,
        "DEBATEBOT_PROVIDER": "fake",
        "DEBATEBOT_SLACK_BOT_TOKEN": "xoxb-1234-5678-emulatedtoken",
        "DEBATEBOT_SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
        "DEBATEBOT_SLACK_API_URL": "http://127.0.0.1:9/api/",
        "DEBATEBOT_HTTP_HOST": "127.0.0.1",
        "DEBATEBOT_HTTP_PORT": str(free_port()),
    }
    try:
        return subprocess.run(
            [DEBATEBOT, *STARTS[command]],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as running:
        stderr = running.stderr.decode() if isinstance(running.stderr, bytes) else ""
        return subprocess.CompletedProcess(running.cmd, 0, "", stderr + "\n(still running)")


@pytest.mark.parametrize("command", list(STARTS))
def test_a_restart_after_the_database_folder_was_deleted_is_refused(
    tmp_path: Path, command: str
) -> None:
    """The deployment's folder (a data directory, a volume that is not mounted) is gone: the
    restart stops, naming the setting and what to do, and creates nothing in its place."""
    path, url, engine = sqlite_with_a_debate(tmp_path, "data")
    engine.dispose()
    shutil.rmtree(path.parent)

    started = start(command, url, cwd=tmp_path)

    assert started.returncode == 1, started.stderr
    said = started.stderr
    assert f"the folder {path.parent} of the SQLite database does not exist" in said
    assert "DEBATEBOT_DATABASE_URL" in said
    assert "restore it from a backup" in said
    assert "debatebot db upgrade" in said
    assert not path.parent.exists(), "no empty database was created in its place"


def test_the_first_run_in_a_fresh_folder_creates_the_database(tmp_path: Path) -> None:
    """The README's first command, with the default URL (a file in the current folder)."""
    started = start("run", "sqlite:///debatebot.sqlite3", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert "recorded as debate 1" in started.stdout
    assert (tmp_path / "debatebot.sqlite3").exists()


async def test_a_full_sqlite_database_is_reported_as_full_and_keeps_what_it_had(
    tmp_path: Path,
) -> None:
    path, url, engine = sqlite_with_a_debate(tmp_path, "full")
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        pages = session.connection().exec_driver_sql("PRAGMA page_count").scalar()
    assert pages is not None
    engine.dispose()
    # SQLite's own size limit: past it, SQLite fails the write with SQLITE_FULL, the same
    # error a full disk gives.
    full = make_engine(url)
    event.listen(
        full,
        "connect",
        lambda connection, _record: connection.execute(f"PRAGMA max_page_count = {pages}"),
    )
    big = SPEC.model_copy(update={"question": "Should we adopt ADR-042? " + "x" * 30_000})
    with (
        pytest.raises(DatabaseUnavailableError) as raised,
        session_scope(full, workspace=PENDING_WORKSPACE) as session,
    ):
        queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="after", spec=big, source=DebateSource.COMMAND)
        )
    message = str(raised.value)
    assert "database or disk is full" in message
    assert f"the disk holding the SQLite file {path} is full" in message
    assert "the server" not in message, "no advice meant for PostgreSQL"
    with session_scope(full, workspace=PENDING_WORKSPACE) as session:
        assert [d.trigger_key for d in session.exec(select(Debate))] == ["before"]
    # The disk has room, yet writes fail: /healthz says so until a write succeeds.
    assert await HealthProbe(full, 1)() == {
        "ok": False,
        "database": "disk full: the last write failed with SQLITE_FULL",
        "concurrency": 1,
    }
    with session_scope(full, workspace=PENDING_WORKSPACE) as session:
        # A statement that writes nothing commits on a full disk too, and proves nothing.
        session.execute(
            update(Debate)
            .where(col(Debate.trigger_key) == "none")
            .values(source=DebateSource.COMMAND)
        )
        session.commit()
    database = (await HealthProbe(full, 1)())["database"]
    assert isinstance(database, str)
    assert database.startswith("disk full")
    with session_scope(full, workspace=PENDING_WORKSPACE) as session:
        session.connection().exec_driver_sql(f"PRAGMA max_page_count = {pages * 4}")
        queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="after", spec=big, source=DebateSource.COMMAND)
        )
    assert await HealthProbe(full, 1)() == {"ok": True, "database": "ok", "concurrency": 1}
    full.dispose()


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make `path` and its folder really read-only: immutable for root (who ignores mode
    bits), mode bits for anyone else."""
    if os.geteuid() == 0:
        for target in (path, path.parent):
            subprocess.run(["chattr", "+i", str(target)], check=True)
        try:
            yield
        finally:
            for target in (path, path.parent):
                subprocess.run(["chattr", "-i", str(target)], check=True)
    else:
        path.chmod(0o444)
        path.parent.chmod(0o555)
        try:
            yield
        finally:
            path.parent.chmod(0o755)
            path.chmod(0o644)


async def test_a_read_only_sqlite_file_is_reported_as_read_only(tmp_path: Path) -> None:
    path, url, seed = sqlite_with_a_debate(tmp_path, "ro")
    seed.dispose()  # the last connection to close folds the WAL into the file

    with read_only(path):
        engine = make_engine(url)
        assert (await HealthProbe(engine, 1)())["database"] == "read-only"
        with pytest.raises(DatabaseUnavailableError) as raised:
            enqueue(engine, "after")
        message = str(raised.value)
        assert "read-only" in message
        assert "write access" in message
        assert "DEBATEBOT_DATABASE_URL" not in message, "no misleading advice"
        engine.dispose()


def test_a_postgresql_that_accepts_no_writes_is_reported_as_read_only(postgres_url: str) -> None:
    """A real server whose database takes no writes (as a standby would answer)."""
    upgrade(postgres_url)
    name = make_url(postgres_url).database
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
    admin.dispose()
    engine = make_engine(postgres_url)

    with pytest.raises(StoreReadOnlyError) as raised:
        enqueue(engine, "after")
    assert "cannot execute INSERT in a read-only transaction" in str(raised.value)
    assert "point DEBATEBOT_DATABASE_URL at the primary" in str(raised.value)
    assert raised.value.where == "its PostgreSQL server accepts no writes"
    engine.dispose()


def test_data_postgresql_refuses_is_a_clear_store_error(postgres_url: str) -> None:
    upgrade(postgres_url)
    store = make_engine(postgres_url)
    row = Debate(
        trigger_key="nul",
        source=DebateSource.COMMAND,
        requested_by="U\x00SER",
        question="q",
        protocol="adversarial",
        spec_json="{}",
    )

    def store_it() -> None:
        with session_scope(store, workspace=PENDING_WORKSPACE) as session:
            session.add(row)
            session.commit()

    with pytest.raises(StoreRefusedError, match="refused the data") as raised:
        store_it()
    assert "nothing was stored" in str(raised.value)
    with Session(store) as session:
        assert session.get(Debate, 1) is None
    store.dispose()


def test_control_characters_are_cleaned_before_they_reach_the_store(store: Engine) -> None:
    spec = DebateSpec.model_validate(
        {**SPEC.model_dump(), "question": "Adopt\x00 ADR\x07-042?\r\nYes\tor no"}
    )
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        debate, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="c", spec=spec, source=DebateSource.COMMAND)
        )
    assert debate.question == "Adopt ADR-042?\nYes\tor no"


async def test_delivery_waits_out_a_lost_database_without_flooding_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gone" / "bot.sqlite3"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    for leftover in path.parent.iterdir():
        leftover.unlink()
    client = AsyncWebClient(token="xoxb-unused-0000", base_url="http://127.0.0.1:9/api/")
    delivery = OutboxDelivery(
        engine=engine,
        poster=SlackPoster(client),
        directory=SlackDirectory(client),
        owner="lonely",
        config=DeliveryConfig(poll_s=0.05),
    )
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="bot.jobs.delivery")

    running = asyncio.create_task(delivery.run_forever(stop))
    await asyncio.sleep(3.5)
    stop.set()
    await asyncio.wait_for(running, 10)

    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    # Tries at 0, 1 and 3 s (backing off), not one every 50 ms poll; each names the problem.
    assert 2 <= len(errors) <= 3
    assert all("does not exist" in e and "next try in" in e for e in errors)
    assert not path.exists()
    engine.dispose()


async def test_an_outage_pause_backs_off_and_logs_a_repeated_failure_sparingly() -> None:
    pause = OutagePause("worker w", base_s=0.001, max_s=0.004)
    records: list[str] = []

    class Log:
        def error(self, message: str, *args: object) -> None:
            records.append(message % args)

        def info(self, message: str, *args: object) -> None:
            records.append(message % args)

    for _ in range(6):
        await pause.failed(RuntimeError("database locked"), asyncio.Event(), Log())  # type: ignore[arg-type]
    pause.succeeded(Log())  # type: ignore[arg-type]

    # The 1 and 2 ms waits are logged; from the 4 ms cap on, the same failure is not.
    assert records[:2] == ["worker w: database locked; next try in 0s"] * 2
    assert len(records) == 3
    assert records[-1] == "worker w: the database answers again after 6 failure(s)"
