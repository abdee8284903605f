"""Alembic environment: the target schema is `SQLModel.metadata` from `bot.store.tables`."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import bot.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
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
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
