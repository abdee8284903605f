"""Alembic migrations of the audit store. At the top of the repository; shipped inside the
wheel as `bot.migrations` (pyproject's package-dir), so a plain install can migrate. The
schema head the code needs is `bot.store.db.SCHEMA_HEAD`."""
