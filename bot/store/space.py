"""Whether the database's disk is full, as `/healthz` reports it.

A full disk fails writes, not reads, so a health check that reads (the schema) cannot see it.
What the process can know instead: the last write that failed for lack of space (SQLITE_FULL,
PostgreSQL's 53100 disk_full), remembered until a write succeeds, and, for SQLite, the free
space left on the file's filesystem.

A write succeeds when a unit of store work (`bot.store.db.session_scope`) that committed an
INSERT, or an UPDATE or DELETE that changed rows, ends without an error; the engine's events
note such a commit on the thread doing the work, and only while a failure is remembered, so
healthy writes pay one check.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event

FREE_SPACE_FLOOR = 1 << 20
"""Below this many free bytes on the filesystem of a SQLite file, its disk is reported full
before a write fails: a turn with its write-ahead log frames takes a few pages, a checkpoint
more."""


class SpaceWatch:
    """One engine's view of its disk: the last write failure for lack of space, if no write
    succeeded since, and the SQLite file (None for a server) whose free space is checked."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.failure: str | None = None

    def failed(self, code: str) -> None:
        self.failure = f"the last write failed with {code}"

    def problem(self) -> str | None:
        """`disk full: …` while writes fail or would, else None."""
        if self.failure is not None:
            return f"disk full: {self.failure}"
        free = free_bytes(self.path.parent) if self.path is not None else None
        if free is not None and free < FREE_SPACE_FLOOR:
            return (
                f"disk full: {free // 1024} KiB free on the database's filesystem (below"
                f" {FREE_SPACE_FLOOR // 1024} KiB)"
            )
        return None


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on `folder`'s filesystem (None if it cannot be
    asked). Root may also use the blocks reserved for it."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    blocks = stats.f_bfree if os.geteuid() == 0 else stats.f_bavail
    return blocks * stats.f_frsize


_watches: weakref.WeakKeyDictionary[Engine, SpaceWatch] = weakref.WeakKeyDictionary()
_work = threading.local()
"""Per store thread, within one unit of work: `wrote` (a write statement ran in the open
transaction) and `committed` (a transaction holding one was committed)."""


def watch(engine: Engine, path: Path | None) -> None:
    """Keep `engine`'s SpaceWatch, noting on the working thread each commit of a write."""
    space = SpaceWatch(path)
    _watches[engine] = space

    @event.listens_for(engine, "after_cursor_execute")
    def _wrote(
        _conn: Connection, cursor: Any, _sql: str, _params: Any, context: Any, _many: bool
    ) -> None:
        # An UPDATE or DELETE that matched no row (a worker's claim of an empty queue) writes
        # nothing, and commits on a full disk too.
        if space.failure is not None and (
            context.isinsert or ((context.isupdate or context.isdelete) and cursor.rowcount != 0)
        ):
            _work.wrote = True

    @event.listens_for(engine, "commit")
    def _committing(_conn: Connection) -> None:
        if getattr(_work, "wrote", False):
            _work.committed = True
        _work.wrote = False

    @event.listens_for(engine, "rollback")
    def _rolled_back(_conn: Connection) -> None:
        _work.wrote = False


def problem(engine: Engine) -> str | None:
    """What `engine`'s SpaceWatch reports (None for an engine `make_engine` did not build)."""
    space = _watches.get(engine)
    return space.problem() if space is not None else None


def unit_started() -> None:
    """A unit of store work begins on this thread: nothing of an earlier one counts."""
    _work.wrote = False
    _work.committed = False


def unit_ended(engine: Engine) -> None:
    """A unit of store work ended without an error: if it committed a write, the disk takes
    writes again."""
    if getattr(_work, "committed", False):
        space = _watches.get(engine)
        if space is not None:
            space.failure = None
    _work.committed = False


def write_failed(engine: Engine, code: str) -> None:
    """A write on `engine` failed for lack of space (`code`, as the database said it)."""
    space = _watches.get(engine)
    if space is not None:
        space.failed(code)
