"""Database engines (SQLite by default, PostgreSQL for production), migrations, schema checks.

SQLite runs in WAL mode with a busy timeout, and every transaction starts `BEGIN IMMEDIATE`: one
writer at a time, waiting up to the timeout instead of failing on a read-to-write upgrade.

A SQLite database is the embedded default of one process, so it migrates itself when a command
opens it (`ensure_schema`), creating the file on first use; PostgreSQL, shared by replicas, is
migrated by an explicit `debatebot db upgrade` (compose's one-shot `migrate` service). Once open,
a SQLite file is used `mode=rw`: one that disappears under a running bot (a deleted folder, a
lost volume) is noticed on the next use and reported; an empty database is never silently
created in its place, where it would hide that every earlier debate is gone.

First use, as opposed to a database that went away, is told apart by its folder: a command
creates a missing SQLite file only in a folder that exists (the current folder of a first
`debatebot run`, the image's /data). A missing folder means the deployment's data (a data
directory, a volume not mounted) is gone or DEBATEBOT_DATABASE_URL points at the wrong place,
and is refused (`DatabaseMissingError`); `debatebot db upgrade` creates both on purpose.
A file deleted from a folder that is still there cannot be told from a first use.

A failure is reported as what it is: the disk is full (`StoreFullError`, remembered for
`/healthz` until a write succeeds: bot.store.space), the database is read-only
(`StoreReadOnlyError`), or it cannot be reached (`DatabaseUnavailableError`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    DisconnectionError,
    InternalError,
    OperationalError,
)
from sqlmodel import Session

from bot.store import space
from bot.store.errors import (
    DatabaseMissingError,
    DatabaseUnavailableError,
    SchemaOutdatedError,
    StoreError,
    StoreFullError,
    StoreNoAnswerError,
    StoreReadOnlyError,
    StoreRefusedError,
)
from bot.store.read_only import reopen_when_writable, unwritable, wal_mode
from bot.store.tenancy import Scope, scoped

if TYPE_CHECKING:
    from alembic.config import Config

R = TypeVar("R")
log = logging.getLogger(__name__)

POSTGRES_CONNECTIONS = 10
"""Connections per PostgreSQL engine: half kept open, half on demand."""
POSTGRES_STORE_THREADS = 3
"""Threads doing a PostgreSQL engine's store work. Its writes come in batches (bot.store.writer),
so a few threads keep the server busy; more measured slower at 200 debates
(`benchmarks/scale.py`), their Python work taking turns on one GIL."""
STORE_DEADLINE_FACTOR = 3
"""A unit of store work run from the event loop (`in_session`) that has not answered after this
many busy timeouts is given up: the database (or the network to it) has stopped answering."""
DEFAULT_DEADLINE_S = 30.0
"""The deadline of an engine `make_engine` did not build."""
IDLE_IN_TRANSACTION_S = 60.0
"""PostgreSQL ends a session idle inside a transaction this long, releasing its locks."""
SCHEMA_HEAD = "0031"
"""The newest revision in `migrations/versions/`: the schema this code needs. Kept here so
checking a database's schema imports no alembic; a test keeps it equal to alembic's own head."""
MIGRATIONS_PACKAGE = "bot.migrations"
"""Alembic's scripts: `migrations/` in the repository, shipped as this package."""


def migrations_dir() -> Path:
    """Where the migration scripts are (found, not imported: the store does not import the
    layer that migrates it)."""
    spec = importlib.util.find_spec(MIGRATIONS_PACKAGE)
    if spec is None or spec.origin is None:
        raise StoreError(
            f"the migrations ({MIGRATIONS_PACKAGE}) are not installed: reinstall debatebot"
            " (`pip install .`, or `scripts/setup` in a checkout)"
        )
    return Path(spec.origin).parent


def redacted(url: str) -> str:
    """The URL without its password, safe for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().absolute()


def make_engine(url: str, *, busy_timeout_s: float = 10.0, create: bool = False) -> Engine:
    """An engine for `url`. A SQLite file (and its folder) is created only with `create`
    (migrations); otherwise a missing file is an error, never a new empty database.

    `busy_timeout_s` bounds every wait on the database, so that none hangs the bot: a lock
    (SQLite's busy timeout, PostgreSQL's `lock_timeout`), a PostgreSQL statement (twice it; not
    for migrations, `create`, which may rewrite large tables), and a unit of store work run
    from the event loop (`in_session`: STORE_DEADLINE_FACTOR times it, for a server that
    stops answering). PostgreSQL also ends a transaction its client left idle past
    `IDLE_IN_TRANSACTION_S` (a frozen worker's row locks), and TCP keepalives and a TCP user
    timeout close a connection to a host that went away without closing it, so the store
    thread stuck on it is freed too.
    """
    deadline_s = busy_timeout_s * STORE_DEADLINE_FACTOR
    if make_url(url).get_backend_name() == "sqlite":
        engine = _sqlite_engine(url, busy_timeout_s=busy_timeout_s, create=create)
    else:
        engine = create_engine(
            url,
            pool_pre_ping=True,
            pool_size=POSTGRES_CONNECTIONS // 2,
            max_overflow=POSTGRES_CONNECTIONS - POSTGRES_CONNECTIONS // 2,
            connect_args=_postgres_connect_args(busy_timeout_s, deadline_s, statements=not create),
        )
    _deadlines[engine] = deadline_s
    space.watch(engine, sqlite_file(url))
    return engine


def _sqlite_engine(url: str, *, busy_timeout_s: float, create: bool) -> Engine:
    """A SQLite engine: WAL, the busy timeout, BEGIN IMMEDIATE, and a file that must exist
    unless `create` (see `make_engine`)."""
    path = sqlite_file(url)
    if path is not None and create:
        path.parent.mkdir(parents=True, exist_ok=True)

    def connect() -> sqlite3.Connection:
        target = ":memory:" if path is None else f"file:{quote(str(path))}?mode=rw"
        if path is not None and create:
            target += "c"
        return sqlite3.connect(target, uri=True, timeout=busy_timeout_s, check_same_thread=False)

    engine = create_engine(url, creator=connect)

    if path is not None and not create:

        @event.listens_for(engine, "checkout")
        def _still_there(_dbapi: Any, _record: Any, _proxy: Any) -> None:
            # A pooled connection would go on writing to a deleted file's inode.
            if not path.exists():
                raise DisconnectionError(f"the SQLite file {path} is gone")

        reopen_when_writable(engine, path)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # The "begin" listener below issues BEGIN IMMEDIATE instead of pysqlite's own BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        wal_mode(cursor, path)
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _postgres_connect_args(
    busy_timeout_s: float, deadline_s: float, *, statements: bool
) -> dict[str, Any]:
    """libpq's connection parameters: the server-side timeouts (in ms) and TCP keepalives."""
    timeouts = {
        "lock_timeout": busy_timeout_s,
        "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION_S,
    }
    if statements:
        timeouts["statement_timeout"] = 2 * busy_timeout_s
    options = " ".join(f"-c {name}={max(1, round(s * 1000))}" for name, s in timeouts.items())
    return {
        # libpq's smallest; 0 would mean wait forever.
        "connect_timeout": max(2, round(busy_timeout_s)),
        "options": options,
        # A server that went away without closing the connection: keepalives notice it while
        # the connection waits for an answer, the user timeout while what was sent is not
        # acknowledged (both close the connection, ending the stuck store call).
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": round(deadline_s * 1000),
    }


def alembic_config(url: str | None = None) -> Config:
    """Alembic's config for the migrations; with `url`, pointed at that database. Alembic is
    imported here, by migrations only: checking the schema needs none of it."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> str:
    """Apply every migration; returns the head revision now in place."""
    from alembic import command

    try:
        command.upgrade(alembic_config(url), "head")
    except OperationalError as error:
        raise unavailable(url, error) from error
    return SCHEMA_HEAD


def check_schema(engine: Engine) -> None:
    """Raise SchemaOutdatedError unless the database is at the migrations' head."""
    url = engine.url.render_as_string(hide_password=False)
    head = SCHEMA_HEAD
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise SchemaOutdatedError(
            f"the SQLite database {path} does not exist: run `debatebot db upgrade` to create"
            " it (if it held debates, restore it from a backup instead)"
        )
    try:
        with engine.connect() as connection:
            current = _current_revision(connection)
    except OperationalError as error:
        raise unavailable(url, error) from error
    if current != head:
        raise SchemaOutdatedError(
            f"the database {redacted(url)} is at schema {current or '(empty)'} but this debatebot"
            f" needs {head}: run `debatebot db upgrade`"
        )


def _current_revision(connection: Connection) -> str | None:
    """The revision alembic recorded, read directly (importing alembic would slow every
    start-up); None for a database alembic never touched."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return str(revision) if revision is not None else None


def ensure_schema(engine: Engine, *, serving: bool = False) -> None:
    """Bring a SQLite database to the migrations' head (creating its file on first use, in a
    folder that exists: DatabaseMissingError otherwise), and check any other database, which
    `debatebot db upgrade` migrates (SchemaOutdatedError).

    With `serving` (`serve` and `worker`, which wait out a store that fails), a SQLite file the
    bot cannot write does not stop the start: it is logged with the fix and served read-only
    (bot.store.read_only), unless its schema needs migrating, which is a write."""
    url = engine.url.render_as_string(hide_password=False)
    path = sqlite_file(url)
    try:
        check_schema(engine)
    except StoreReadOnlyError as error:
        # Not even readable (a WAL file in a folder the bot cannot write).
        if not serving:
            raise
        _serving_read_only(error)
        return
    except SchemaOutdatedError:
        if engine.dialect.name != "sqlite" or path is None:
            raise
        if not path.exists() and not path.parent.is_dir():
            raise DatabaseMissingError(
                f"the folder {path.parent} of the SQLite database does not exist, so it was"
                " not created there: if the bot's data was in it (a deleted folder, a volume"
                " that is not mounted), restore it from a backup; if DEBATEBOT_DATABASE_URL"
                f" ({redacted(url)}) points at the wrong place, correct it; to start an empty"
                " database there, create the folder or run `debatebot db upgrade`"
            ) from None
        revision = upgrade(url)
        log.info("migrated the SQLite database %s to schema %s", path, revision)
        check_schema(engine)
    if serving and path is not None and unwritable(path):
        _serving_read_only(_sqlite_read_only(url, "a file it needs cannot be written", path))


def _serving_read_only(error: StoreReadOnlyError) -> None:
    log.error(
        "%s. Serving anyway: /healthz answers 503 and every request is told that the store is"
        " read-only until the file can be written, which the bot then does without a restart",
        error,
    )


READ_ONLY_HEALTH = (
    "read-only: the bot cannot write the database file, its folder or the -wal and -shm files"
    " beside it; make them writable by the bot's user"
)
"""What `/healthz` says of a SQLite file the bot cannot write: the cause and the fix, with no
path (anyone may ask `/healthz`; the log names the file)."""
SQLSTATE_DISK_FULL = "53100"
SQLSTATE_READ_ONLY = "25006"
SQLITE_FULL = 13


def unavailable(url: str, error: DBAPIError) -> DatabaseUnavailableError:
    """What a failure of the database means, as an error that says what to do: the disk is
    full (StoreFullError), the database is read-only (StoreReadOnlyError), or it cannot be
    used for another reason (DatabaseUnavailableError)."""
    reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    path = sqlite_file(url)
    if path is not None and not path.exists():
        advice = (
            f"the SQLite file {path} does not exist (was it deleted?); restore it from a backup,"
            " or run `debatebot db upgrade` to start an empty one"
        )
    elif "locked" in reason:
        advice = (
            "another process holds the SQLite write lock; retry, or use PostgreSQL for many writers"
        )
    elif code := _out_of_space(error, path):
        return _full(url, reason, path, code)
    elif read_only := _read_only_failure(url, error, reason, path):
        return read_only
    elif path is not None and "disk I/O" in reason:
        advice = (
            f"reading or writing the SQLite file {path} failed on the disk (unmounted or"
            " failing?); check the system log, then retry"
        )
    elif path is not None:
        advice = (
            f"check that the SQLite file {path} can be opened and DEBATEBOT_DATABASE_URL is right"
        )
    elif "lock timeout" in reason:
        advice = (
            "another transaction held a lock this one needed past the lock timeout; find it in"
            " pg_stat_activity (a session 'idle in transaction', or a long query), end it and"
            f" retry (the server ends a transaction left idle for {IDLE_IN_TRANSACTION_S:g} s)"
        )
    elif "statement timeout" in reason:
        advice = (
            "a statement ran past the statement timeout: the server is overloaded or waiting on"
            " its disk; check its load and pg_stat_activity, then retry"
        )
    else:
        advice = "check that the server runs and DEBATEBOT_DATABASE_URL is right"
    return DatabaseUnavailableError(_unavailable(url, reason, advice))


def _out_of_space(error: DBAPIError, path: Path | None) -> str | None:
    """How the database said that a write found no space (None if it did not): SQLite's
    SQLITE_FULL, a disk I/O error on a SQLite file's filesystem that has no space left (the
    shared-memory index could not grow), PostgreSQL's 53100 disk_full."""
    if getattr(error.orig, "sqlstate", None) == SQLSTATE_DISK_FULL:
        return "PostgreSQL 53100 disk_full"
    if path is None:
        return None
    code = getattr(error.orig, "sqlite_errorcode", None)
    reason = str(error.orig)
    # The primary code of an extended one; the message is SQLite's own for that code.
    if (isinstance(code, int) and code & 0xFF == SQLITE_FULL) or "disk is full" in reason:
        return "SQLITE_FULL"
    if "disk I/O" in reason and (space.free_bytes(path.parent) or 0) < space.FREE_SPACE_FLOOR:
        return "a disk I/O error with no space left"
    return None


def _full(url: str, reason: str, path: Path | None, code: str) -> StoreFullError:
    if path is None:
        advice = (
            "the PostgreSQL server's disk is full; free space there (its data and WAL folders)"
            " and retry: what was stored before stays"
        )
    else:
        advice = (
            f"the disk holding the SQLite file {path} is full (or the file reached its size"
            " limit); free space there (its write-ahead log needs room too) and retry: what was"
            " stored before stays"
        )
    return StoreFullError(
        f"database {redacted(url)} is out of space ({reason}): {advice}", code=code
    )


def _read_only_failure(
    url: str, error: DBAPIError, reason: str, path: Path | None
) -> StoreReadOnlyError | None:
    """The error for a database that refused a write because it is read-only (None if it did
    not): SQLite's SQLITE_READONLY, or a file or folder the bot cannot write (SQLite then opens
    the file read-only, or not at all); PostgreSQL's 25006 read_only_sql_transaction."""
    if path is not None and ("readonly" in reason or "read-only" in reason or unwritable(path)):
        return _sqlite_read_only(url, reason, path)
    if getattr(error.orig, "sqlstate", None) == SQLSTATE_READ_ONLY:
        advice = (
            "the PostgreSQL server accepts no writes (a standby, or default_transaction_read_only"
            " is on); point DEBATEBOT_DATABASE_URL at the primary, or turn that setting off"
        )
        return StoreReadOnlyError(
            f"database {redacted(url)} is read-only ({reason}): {advice}",
            where="its PostgreSQL server accepts no writes",
        )
    return None


def _sqlite_read_only(url: str, reason: str, path: Path) -> StoreReadOnlyError:
    advice = (
        f"the SQLite file {path}, its folder, or the {path.name}-wal and {path.name}-shm files"
        " SQLite keeps beside it is read-only; give the bot's user write access to all of them"
        " (`chmod u+w` and `chown` the folder and every file whose name starts with"
        f" {path.name}), and check that none is immutable (lsattr) or on a read-only mount"
    )
    return StoreReadOnlyError(
        f"database {redacted(url)} is read-only ({reason}): {advice}", where=f"the file {path}"
    )


def _unavailable(url: str, reason: str, advice: str) -> str:
    return f"database {redacted(url)} unavailable ({reason}): {advice}"


def health(engine: Engine) -> str | None:
    """What is wrong with the database for serving (None when nothing is): a missing or
    read-only SQLite file, a full disk (`disk full: …`, see bot.store.space), an unreachable
    server, an old schema."""
    path = sqlite_file(engine.url.render_as_string(hide_password=False))
    if path is not None:
        if not path.exists():
            return "missing"
        if unwritable(path):
            return READ_ONLY_HEALTH
    if full := space.problem(engine):
        return full
    try:
        check_schema(engine)
    except SchemaOutdatedError:
        return "schema outdated"
    except StoreError:
        return "unavailable"
    return None


@contextmanager
def session_scope(engine: Engine, *, workspace: Scope) -> Iterator[Session]:
    """A unit of store work for `workspace` (bot.store.tenancy: its rows only, or every
    workspace's): a session whose failures become store errors with advice (`unavailable`),
    and whose outcome tells the engine's SpaceWatch (bot.store.space) when a write failed for
    lack of space, or succeeded."""
    space.unit_started()
    try:
        with Session(engine, expire_on_commit=False) as session:
            yield scoped(session, workspace)
    except (OperationalError, InternalError) as error:
        if isinstance(error, InternalError) and (
            getattr(error.orig, "sqlstate", None) != SQLSTATE_READ_ONLY
        ):
            raise
        failure = unavailable(engine.url.render_as_string(hide_password=False), error)
        if isinstance(failure, StoreFullError):
            space.write_failed(engine, failure.code)
        raise failure from error
    except DataError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        raise StoreRefusedError(
            f"the database refused the data ({reason}); nothing was stored"
        ) from error
    space.unit_ended(engine)


_executors: weakref.WeakKeyDictionary[Engine, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_deadlines: weakref.WeakKeyDictionary[Engine, float] = weakref.WeakKeyDictionary()
_executors_lock = threading.Lock()


def store_executor(engine: Engine) -> ThreadPoolExecutor:
    """The threads that do `engine`'s store work: one for SQLite, the pool's size otherwise.

    SQLite takes one writer at a time, and a second thread waiting for its lock sleeps in
    SQLite's busy handler (1 ms, 2 ms, … 100 ms): with the default executor's threads
    contending, a short write could wait a second at 200 debates. One thread per SQLite engine
    queues the work in order instead. PostgreSQL has row locks, so its work runs on a few threads
    (`POSTGRES_STORE_THREADS`); asyncio's shared default executor is left to everything else.
    """
    with _executors_lock:
        executor = _executors.get(engine)
        if executor is None:
            threads = 1 if engine.dialect.name == "sqlite" else POSTGRES_STORE_THREADS
            executor = ThreadPoolExecutor(threads, thread_name_prefix="debatebot-store")
            _executors[engine] = executor
            weakref.finalize(engine, executor.shutdown, wait=False)
        return executor


async def in_session(engine: Engine, work: Callable[[Session], R], *, workspace: Scope) -> R:
    """Run one unit of store work for `workspace` (see `session_scope`) on the engine's store
    threads (`store_executor`), so the event loop never blocks on the database.

    Raises StoreNoAnswerError (a DatabaseUnavailableError) when the work has not answered by
    the engine's deadline (`make_engine`): a server that stopped answering, or a network that
    drops packets without closing the connection, would otherwise hang every debate waiting on
    the store. The thread stays with the work (a database call cannot be taken back); its late
    result is dropped (a write it held may still be stored), and work queued behind it that has
    not started by its own deadline never runs.
    """

    def call() -> R:
        with session_scope(engine, workspace=workspace) as session:
            return work(session)

    job = store_executor(engine).submit(call)
    future = asyncio.wrap_future(job)
    deadline = _deadlines.get(engine, DEFAULT_DEADLINE_S)
    try:
        done, _ = await asyncio.wait({future}, timeout=deadline)
    except asyncio.CancelledError:
        # As awaiting the future would: work not started is dropped, a late result too.
        future.cancel()
        raise
    if not done:
        # Work still queued behind the stuck call never runs (a claim or a lease renewal run
        # minutes late would take or keep debates nobody runs); work running ends when the
        # database answers, and only says so.
        if not job.cancel():
            job.add_done_callback(_ended_late)
            # Its end, then, is not handed to this loop: an error there nobody awaits would be
            # reported as never retrieved, at whatever moment the future is collected.
            future.cancel()
        raise StoreNoAnswerError(
            _unavailable(
                engine.url.render_as_string(hide_password=False),
                f"no answer within {deadline:g} s",
                "the server or the network to it stopped answering, or the store's threads are"
                " stuck behind such a call; check the server and the network, then retry (what"
                " was stored stays)",
            )
        )
    return future.result()


def _ended_late(job: Future[Any]) -> None:
    """A unit of store work given up at its deadline ended after all (on its store thread)."""
    if job.exception() is not None:
        log.warning("a store call given up at its deadline failed later: %s", job.exception())
    else:
        log.warning(
            "a store call given up at its deadline ended later: what it wrote is stored, its"
            " answer was not used"
        )
