"""Database engines (SQLite by default, PostgreSQL for production), migrations, schema checks.

SQLite runs in WAL mode with a busy timeout, and every transaction starts `BEGIN IMMEDIATE`: one
writer at a time, waiting up to the timeout instead of failing on a read-to-write upgrade.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from bot.store.errors import DatabaseUnavailableError, SchemaOutdatedError

R = TypeVar("R")

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def redacted(url: str) -> str:
    """The URL without its password, safe for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str, *, busy_timeout_s: float = 10.0) -> Engine:
    """An engine for `url`; creates the SQLite file's folder if needed."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"timeout": busy_timeout_s, "check_same_thread": False}
        )

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            # The "begin" listener below issues BEGIN IMMEDIATE instead of pysqlite's own BEGIN.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=5,
        connect_args={"connect_timeout": int(busy_timeout_s)},
    )


def alembic_config(url: str | None = None) -> Config:
    """Alembic's config for `migrations/`; with `url`, pointed at that database."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> str:
    """Apply every migration; returns the head revision now in place."""
    try:
        command.upgrade(alembic_config(url), "head")
    except OperationalError as error:
        raise unavailable(url, error) from error
    return head_revision()


def head_revision() -> str:
    """The newest revision in `migrations/`: the schema this code needs."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "migrations/ has no revisions"
    return head


def check_schema(engine: Engine) -> None:
    """Raise SchemaOutdatedError unless the database is at the migrations' head."""
    url = engine.url.render_as_string(hide_password=False)
    head = head_revision()
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
    except OperationalError as error:
        raise unavailable(url, error) from error
    if current != head:
        raise SchemaOutdatedError(
            f"the database {redacted(url)} is at schema {current or '(empty)'} but this debatebot"
            f" needs {head}: run `debatebot db upgrade`"
        )


def unavailable(url: str, error: OperationalError) -> DatabaseUnavailableError:
    reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    if "locked" in reason:
        advice = (
            "another process holds the SQLite write lock; retry, or use PostgreSQL for many writers"
        )
    else:
        advice = "check that the server runs and DEBATEBOT_DATABASE_URL is right"
    return DatabaseUnavailableError(f"database {redacted(url)} unavailable ({reason}): {advice}")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session whose connection failures become DatabaseUnavailableError with advice."""
    try:
        with Session(engine, expire_on_commit=False) as session:
            yield session
    except OperationalError as error:
        raise unavailable(engine.url.render_as_string(hide_password=False), error) from error


async def in_session(engine: Engine, work: Callable[[Session], R]) -> R:
    """Run one unit of store work in a thread, so the event loop never blocks on the database."""

    def call() -> R:
        with session_scope(engine) as session:
            return work(session)

    return await asyncio.to_thread(call)
