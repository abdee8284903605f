"""Alembic environment: the target schema is `SQLModel.metadata`, on which every table module
of the store (`bot/store/*_tables.py`) registers its tables when imported."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import bot.store.calibration_tables
import bot.store.channel_tables
import bot.store.debate_tables
import bot.store.dedupe_tables
import bot.store.held_tables
import bot.store.installation_tables
import bot.store.outbox_tables
import bot.store.receipt_tables
import bot.store.review_tables
import bot.store.schedule_tables
import bot.store.threshold_tables  # noqa: F401  (each registers its tables on SQLModel.metadata)
from bot.store.db import make_engine

target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "alembic needs sqlalchemy.url; run migrations through `debatebot db upgrade`"
    engine = make_engine(url, create=True)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # A batch operation on SQLite copies the table and drops the old one, which the
            # other tables' foreign keys forbid while they are enforced. The pragma only takes
            # effect outside a transaction, so it goes straight to the driver's connection.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration broke foreign keys: {broken[:5]}")
        if sqlite:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
