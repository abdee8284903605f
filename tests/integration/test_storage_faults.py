"""Storage faults never eat data: a SQLite file deleted under a running bot is reported, never
silently re-created; a read-only file is reported as read-only with the right advice; data a
database refuses becomes a clear error; and `/healthz` says which, without naming the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine, create_engine, delete, event, text, update
from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

from bot.health import HealthProbe
from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
from bot.jobs.pause import OutagePause
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.store import queue
from bot.store.db import (
    READ_ONLY_HEALTH,
    check_schema,
    ensure_schema,
    make_engine,
    session_scope,
    upgrade,
)
from bot.store.debate_tables import Debate, DebateSource
from bot.store.errors import (
    DatabaseUnavailableError,
    SchemaOutdatedError,
    StoreReadOnlyError,
    StoreRefusedError,
)
from bot.store.read_only import SIDECARS
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
def read_only(path: Path, *, folder: bool = True) -> Iterator[None]:
    """Make `path` (and, with `folder`, its folder) read-only as the kernel enforces it for this
    user: immutable for root (who ignores mode bits but not that flag), mode bits for anyone
    else. Checked, not assumed: the test is skipped, saying why, where this user can still
    write them (root without CAP_LINUX_IMMUTABLE or on a filesystem without the flag, a user
    with CAP_DAC_OVERRIDE)."""
    targets = [path, path.parent] if folder else [path]
    modes = {target: target.stat().st_mode & 0o777 for target in targets}
    if os.geteuid() == 0:
        for n, target in enumerate(targets):
            made = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True)
            if made.returncode != 0:
                for done in targets[:n]:
                    subprocess.run(["chattr", "-i", str(done)], check=True)
                pytest.skip(f"root cannot make {target} immutable here: {made.stderr.strip()}")
    else:
        for target in targets:
            target.chmod(0o555 if target.is_dir() else 0o444)
    try:
        writable = [target for target in targets if _writable(target)]
        if writable:
            pytest.skip(f"this user can write {writable[0]} whatever its mode (CAP_DAC_OVERRIDE?)")
        yield
    finally:
        for target in targets:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(target)], check=True)
            else:
                target.chmod(modes[target])
        # As an operator's `chmod u+w bot.sqlite3*` would: SQLite gives the log and index it
        # creates the file's mode, read-only ones while the file was.
        for suffix in SIDECARS:
            sidecar = path.with_name(path.name + suffix)
            if os.geteuid() != 0 and sidecar.exists() and sidecar not in modes:
                sidecar.chmod(modes[path])


def _writable(target: Path) -> bool:
    """Whether the kernel lets this process write `target` (a file, or a folder's entries)."""
    probe = target / ".write-probe" if target.is_dir() else target
    try:
        descriptor = os.open(probe, os.O_WRONLY | (os.O_CREAT if target.is_dir() else 0), 0o600)
    except OSError:
        return False
    os.close(descriptor)
    if probe != target:
        probe.unlink()
    return True


async def test_a_read_only_sqlite_file_is_reported_as_read_only(tmp_path: Path) -> None:
    path, url, seed = sqlite_with_a_debate(tmp_path, "ro")
    seed.dispose()  # the last connection to close folds the WAL into the file

    with read_only(path):
        engine = make_engine(url)
        assert (await HealthProbe(engine, 1)())["database"] == READ_ONLY_HEALTH
        with pytest.raises(DatabaseUnavailableError) as raised:
            enqueue(engine, "after")
        message = str(raised.value)
        assert "read-only" in message
        assert "write access" in message
        assert "DEBATEBOT_DATABASE_URL" not in message, "no misleading advice"
        engine.dispose()


READ_ONLY_KINDS = {
    # A backup restored as another user: SQLite's rollback journal (not WAL), the file read-only
    # in a folder the bot may write. Asking for WAL at connection set-up is then a write.
    "journal file": False,
    # The bot's own WAL file, it and its folder read-only (a read-only mount, a volume that
    # changed owner): SQLite cannot create the index a WAL file is read with, so nothing can be
    # read either.
    "wal file and folder": True,
}


def read_only_kind(tmp_path: Path, kind: str, *, queued: bool = True) -> tuple[Path, str]:
    """A migrated SQLite file (holding one queued debate, "before", if `queued`) in the journal
    mode of `kind` (READ_ONLY_KINDS); its path and URL, nothing left open on it."""
    path, url, seed = sqlite_with_a_debate(tmp_path, "ro")
    if not queued:
        with session_scope(seed, workspace=PENDING_WORKSPACE) as session:
            session.execute(delete(Debate))
            session.commit()
    seed.dispose()  # the last connection to close folds the WAL into the file
    if not READ_ONLY_KINDS[kind]:
        with contextlib.closing(sqlite3.connect(path)) as connection:
            assert connection.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    return path, url


def states(url: str) -> dict[str, str]:
    engine = make_engine(url)
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        found = {d.trigger_key: d.state.value for d in session.exec(select(Debate))}
    engine.dispose()
    return found


@pytest.mark.parametrize("kind", list(READ_ONLY_KINDS))
def test_a_read_only_sqlite_file_is_served_read_only_and_written_again_once_writable(
    tmp_path: Path, kind: str
) -> None:
    """The same engine, kept open across the fix: while the file cannot be written, what it
    holds is read where SQLite can read it, and writes are refused as read-only; once it can,
    the next write succeeds (no restart), in WAL mode again."""
    path, url = read_only_kind(tmp_path, kind)
    engine = make_engine(url)
    with read_only(path, folder=READ_ONLY_KINDS[kind]):
        if READ_ONLY_KINDS[kind]:
            with pytest.raises(StoreReadOnlyError):
                check_schema(engine)
        else:
            check_schema(engine)
            with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
                assert [d.trigger_key for d in session.exec(select(Debate))] == ["before"]
        with pytest.raises(StoreReadOnlyError) as raised:
            enqueue(engine, "refused")
        assert raised.value.where == f"the file {path}"
        assert "give the bot's user write access to all of them" in str(raised.value)

    enqueue(engine, "after")
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        mode = session.connection().exec_driver_sql("PRAGMA journal_mode").scalar()
    engine.dispose()
    assert mode == "wal"
    assert states(url) == {"before": "queued", "after": "queued"}


def killed_holding(path: Path) -> None:
    """A process that opened the SQLite file at `path` is killed, leaving its index and log."""
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "connection = sqlite3.connect(sys.argv[1])\n"
            "print(connection.execute('PRAGMA journal_mode').fetchone()[0], flush=True)\n"
            "time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert killed.stdout is not None
    assert killed.stdout.readline().strip() == "wal"
    killed.kill()
    killed.wait()
    killed.stdout.close()


async def test_a_read_only_index_beside_a_writable_file_is_reported_as_read_only(
    tmp_path: Path,
) -> None:
    """The file and its folder can be written, but SQLite's shared-memory index beside it
    (left by a process that was killed, created while the file was read-only) cannot: writes
    are still refused, so `/healthz` does not say the store is fine, and the advice names the
    files beside it. Once it can be written, so can the store, without a restart."""
    path, url = read_only_kind(tmp_path, "wal file and folder")
    killed_holding(path)
    index = path.with_name(path.name + "-shm")
    assert index.exists(), "a killed process leaves the index"
    engine = make_engine(url)
    with read_only(index, folder=False):
        assert (await HealthProbe(engine, 1)())["database"] == READ_ONLY_HEALTH
        with pytest.raises(StoreReadOnlyError) as raised:
            enqueue(engine, "refused")
        assert f"{path.name}-shm files SQLite keeps beside it" in str(raised.value)
    enqueue(engine, "after")
    assert await HealthProbe(engine, 1)() == {"ok": True, "database": "ok", "concurrency": 1}
    engine.dispose()
    assert states(url) == {"before": "queued", "after": "queued"}


@pytest.mark.parametrize("kind", list(READ_ONLY_KINDS))
def test_serving_starts_on_a_read_only_sqlite_file_and_says_so(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`serve` and `worker` start, saying what is wrong and what to do; a command that needs
    to read the file (`stats`) reads it where SQLite can, and otherwise stops saying why."""
    path, url = read_only_kind(tmp_path, kind)
    engine = make_engine(url)
    caplog.clear()  # what making the file said (its migrations) is not what serving it says
    with read_only(path, folder=READ_ONLY_KINDS[kind]), caplog.at_level(logging.ERROR):
        if READ_ONLY_KINDS[kind]:
            with pytest.raises(StoreReadOnlyError, match=r"its folder, or the bot\.sqlite3-wal"):
                ensure_schema(engine)
        else:
            ensure_schema(engine)
        assert caplog.records == []
        ensure_schema(engine, serving=True)
    engine.dispose()
    [said] = [r.getMessage() for r in caplog.records if r.name == "bot.store.db"]
    assert f"database {url} is read-only" in said
    assert f"the SQLite file {path}, its folder, or the bot.sqlite3-wal and" in said
    assert "Serving anyway: /healthz answers 503" in said


@pytest.mark.parametrize("kind", list(READ_ONLY_KINDS))
def test_a_worker_on_a_read_only_file_says_so_waits_and_runs_the_debate_once_writable(
    tmp_path: Path, kind: str
) -> None:
    """`debatebot worker` started on a file it cannot write (a restart policy would otherwise
    start it again and again): it says what is wrong and what to do, tries again less and less
    often, and runs the queued debate once the file can be written."""
    path, url = read_only_kind(tmp_path, kind)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env |= {"DEBATEBOT_DATABASE_URL": url, "DEBATEBOT_PROVIDER": "fake"}
    log = tmp_path / "worker.log"
    with read_only(path, folder=READ_ONLY_KINDS[kind]):
        with log.open("w") as stderr:
            worker = subprocess.Popen(
                [DEBATEBOT, "worker", "--exit-when-idle"],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        try:
            for _ in range(600):
                if log.read_text().count("next try in") >= 2 or worker.poll() is not None:
                    break
                time.sleep(0.1)
            assert worker.poll() is None, f"the worker stopped: {log.read_text()}"
        except BaseException:
            worker.kill()
            worker.wait()
            raise
    try:
        worker.wait(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    said = log.read_text()
    assert worker.returncode == 0, said
    assert f"the SQLite file {path}, its folder, or the bot.sqlite3-wal and" in said
    assert "give the bot's user write access to all of them" in said
    assert "; next try in 1s" in said
    assert "; next try in 2s" in said
    assert "the database answers again" in said
    assert states(url) == {"before": "finished"}


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
