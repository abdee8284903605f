"""Migrated databases for tests, copied from one migrated for real.

Running every migration takes about a second of CPU a database, and the suite makes a fresh
database for most store tests on each backend. So the first fresh database of a backend that a
test process migrates is migrated by `bot.store.db.upgrade` into a template of that process, and
later fresh databases are copies of it: a SQLite file copied, a PostgreSQL database created
`TEMPLATE` it. The result is the same schema and rows (a migration's own inserts included), since
the template is the real migrations' output. A database that is not new and empty (an older
schema a test upgrades, or a file with rows) is migrated for real, and the tests of migrations
themselves call `bot.store.db.upgrade` directly.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from bot.store.db import SCHEMA_HEAD, sqlite_file
from bot.store.db import upgrade as migrate_for_real

_sqlite_template: Path | None = None
_postgres_templates: dict[str, str] = {}  # server (the URL without its database) -> template


def upgrade(url: str) -> str:
    """As `bot.store.db.upgrade`; a new, empty database becomes a copy of this process's
    template, anything else is migrated for real."""
    path = sqlite_file(url)
    if path is not None:
        if path.exists() and path.stat().st_size > 0:
            return migrate_for_real(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_sqlite_template_file(), path)
        return SCHEMA_HEAD
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql" or not parsed.database:
        return migrate_for_real(url)
    if not _postgres_is_empty(url):
        return migrate_for_real(url)
    admin_url = parsed.set(database="postgres").render_as_string(hide_password=False)
    template = _postgres_template(admin_url)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            # The test's database is empty and nobody is connected to it yet (else DROP fails
            # and it is migrated for real below): it is made again as a copy of the template.
            connection.execute(text(f'DROP DATABASE "{parsed.database}"'))
            connection.execute(text(f'CREATE DATABASE "{parsed.database}" TEMPLATE "{template}"'))
    except DBAPIError:
        return migrate_for_real(url)
    finally:
        admin.dispose()
    return SCHEMA_HEAD


def _sqlite_template_file() -> Path:
    global _sqlite_template
    if _sqlite_template is None:
        folder = Path(tempfile.mkdtemp(prefix="debatebot-template-"))
        atexit.register(shutil.rmtree, folder, True)
        template = folder / "template.sqlite3"
        migrate_for_real(f"sqlite:///{template}")
        # The migrations' engine is disposed, so the WAL is already folded in; this makes sure
        # the one file holds everything before it is copied.
        connection = sqlite3.connect(template)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
        _sqlite_template = template
    return _sqlite_template


def _postgres_is_empty(url: str) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return not inspect(connection).get_table_names()
    finally:
        engine.dispose()


def _postgres_template(admin_url: str) -> str:
    template = _postgres_templates.get(admin_url)
    if template is None:
        template = f"debatebot_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{template}"'))
        finally:
            admin.dispose()
        migrate_for_real(
            make_url(admin_url).set(database=template).render_as_string(hide_password=False)
        )
        atexit.register(_drop, admin_url, template)
        _postgres_templates[admin_url] = template
    return template


def _drop(admin_url: str, database: str) -> None:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    except DBAPIError:
        pass  # the server may already be stopped at exit; its data folder goes with it
    finally:
        admin.dispose()
