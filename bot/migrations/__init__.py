"""Alembic migrations of the audit store, shipped in the package (see bot.store.db)."""

SCHEMA_HEAD = "0015"
"""The newest revision in `versions/`: the schema this code needs. Kept here so checking a
database's schema imports no alembic; a test keeps it equal to alembic's own head."""
