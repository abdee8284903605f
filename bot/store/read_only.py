"""A SQLite file the bot cannot write (a read-only or immutable file or folder, a read-only
mount): served read-only until it can be written, without a restart.

SQLite opens such a file read-only (its `mode=rw` open falls back to reading). The bot keeps it
open that way: what was stored can be read (`/healthz`, `debatebot stats`), and every write is
refused as read-only (`StoreReadOnlyError`, told to the person who asked). Two things stand in
the way, and are handled here:

- the connection's set-up asks for WAL mode, which is a write on a file not already in it (a
  backup restored with the rollback journal): on a file the bot cannot write the request is
  left out, the file is read in its own mode, and a connection opened once it is writable
  turns WAL on;
- a connection opened read-only stays so for its life, also after the file became writable:
  such a connection is replaced when it is next taken from the pool, so the first write after
  the fix succeeds.

A WAL file in a folder the bot cannot write cannot even be read (SQLite must create its
shared-memory index beside it): every use, reads too, is then refused as read-only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

log = logging.getLogger(__name__)

OPENED_READ_ONLY = "debatebot_opened_read_only"
"""A pooled connection's mark: its file could not be written when it was opened."""


SIDECARS = ("-wal", "-shm")
"""The files SQLite keeps beside a WAL database: its write-ahead log and shared-memory index.
It creates them with the database file's mode, so ones created while the file was read-only
stay read-only after the file is fixed, and keep every write refused."""


def unwritable(path: Path | None) -> bool:
    """Whether a SQLite file exists but cannot be written: it, its folder, or a write-ahead
    log or shared-memory index beside it (`SIDECARS`). `os.access` asks the kernel, so an
    immutable file or a read-only mount counts for root too, who ignores mode bits."""
    if path is None or not path.exists():
        return False
    sidecars = [path.with_name(path.name + suffix) for suffix in SIDECARS]
    needed = [path, path.parent, *(sidecar for sidecar in sidecars if sidecar.exists())]
    return not all(os.access(target, os.W_OK) for target in needed)


def wal_mode(cursor: sqlite3.Cursor, path: Path | None) -> None:
    """Ask for WAL mode on a new connection; on a file the bot cannot write, a refusal is not
    an error (the file is read in its own mode: see the module's docstring)."""
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        if not unwritable(path):
            raise
        log.debug("%s cannot be written: read in its own journal mode", path)


def reopen_when_writable(engine: Engine, path: Path) -> None:
    """Mark each connection opened while `path` could not be written, and replace it when it
    is taken from the pool once `path` can be (the pool opens a new one in its place)."""

    @event.listens_for(engine, "connect")
    def _opened(_dbapi: Any, record: Any) -> None:
        record.info[OPENED_READ_ONLY] = unwritable(path)

    @event.listens_for(engine, "checkout")
    def _writable_again(_dbapi: Any, record: Any, _proxy: Any) -> None:
        if record.info.get(OPENED_READ_ONLY) and not unwritable(path):
            log.info("the SQLite file %s can be written again: reopening it", path)
            raise DisconnectionError(f"{path} was opened read-only and can be written now")
