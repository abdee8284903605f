"""The audit store: SQLModel tables, the database engine, and keyword-only repository functions
that take values and rows (never Slack code or rendered-on-demand callbacks). The SQL of the bot
lives here; the migrations are `migrations/` at the top of the repository."""
