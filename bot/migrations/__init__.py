"""Alembic migrations of the audit store, shipped in the package (see bot.store.db)."""
