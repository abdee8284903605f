"""The audit store: SQLModel tables, the database engine, and keyword-only repository functions.

No SQL lives outside this package.
"""
