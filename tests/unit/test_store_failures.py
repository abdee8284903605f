"""What a database failure is called and what people are told of it, for the failures no test
here can cause for real: a PostgreSQL server whose disk is full (SQLSTATE 53100), and a
reaction that met a store failure."""

from __future__ import annotations

import psycopg.errors
from sqlalchemy.exc import OperationalError

from bot.slack.failures import store_answer
from bot.store.db import unavailable
from bot.store.errors import DatabaseUnavailableError, StoreFullError, StoreReadOnlyError

URL = "postgresql+psycopg://debatebot:secret@db.internal:5432/debatebot"


def test_postgresql_disk_full_is_a_full_store_with_the_servers_advice() -> None:
    # The exception psycopg raises for that SQLSTATE, as SQLAlchemy wraps it.
    refused = psycopg.errors.DiskFull('could not extend file "base/16384/16421": No space left')
    failure = unavailable(URL, OperationalError("INSERT INTO debate ...", {}, refused))

    assert isinstance(failure, StoreFullError)
    assert failure.code == "PostgreSQL 53100 disk_full"
    assert "the PostgreSQL server's disk is full" in str(failure)
    assert "secret" not in str(failure)


def test_what_people_are_told_names_the_problem_and_what_to_redo() -> None:
    full = StoreFullError("…", code="SQLITE_FULL")
    assert store_answer(full) == (
        ":x: The bot's disk is full, so nothing was queued. An admin must free space on the disk"
        " that holds the debate store; then try again."
    )
    read_only = StoreReadOnlyError("…", where="the file /data/<debatebot>.sqlite3")
    assert "(the file /data/&lt;debatebot&gt;.sqlite3)" in store_answer(read_only)
    reaction = store_answer(DatabaseUnavailableError(), event={"type": "reaction_added"})
    assert "nothing will be: remove the reaction and add it again" in reaction
