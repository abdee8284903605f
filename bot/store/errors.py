"""The store's errors; each says what to do about it."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the store's errors."""


class DatabaseUnavailableError(StoreError):
    """The database cannot be reached or stayed locked past the timeout."""


class StoreNoAnswerError(DatabaseUnavailableError):
    """The database did not answer a unit of store work by its deadline. The work may still
    end, so a write it held may yet be stored: `may_have_stored` says the caller knows it was
    a write whose outcome is therefore unknown."""

    def __init__(self, message: str, *, may_have_stored: bool = False) -> None:
        super().__init__(message)
        self.may_have_stored = may_have_stored


class StoreFullError(DatabaseUnavailableError):
    """Writes fail for lack of space: the database's disk is full (or a SQLite file reached its
    size limit). What was stored stays; nothing new is until space is freed. `code` names the
    failure as the database reported it (SQLITE_FULL, PostgreSQL 53100 disk_full)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class StoreReadOnlyError(DatabaseUnavailableError):
    """The database can be read but not written: a read-only or immutable file or folder, a
    read-only mount, a PostgreSQL standby. `where` names it for the people who are told."""

    def __init__(self, message: str, *, where: str) -> None:
        super().__init__(message)
        self.where = where


class DatabaseMissingError(StoreError):
    """The folder of the SQLite database is gone; no empty database is created in its place."""


class StoreRefusedError(StoreError):
    """The database refused what was to be stored (data it cannot hold); nothing was stored."""


class SchemaOutdatedError(StoreError):
    """The database schema is not at the version this code needs."""


class DebateNotFoundError(StoreError):
    """No debate with that id."""


class LeaseLostError(StoreError):
    """Another worker holds the debate now (our lease expired); this worker must stop."""


class InFlightLimitError(StoreError):
    """A new debate would pass a limit of debates queued or running at once."""

    def __init__(self, message: str, *, scope: str, count: int, limit: int) -> None:
        super().__init__(message)
        self.scope = scope
        self.count = count
        self.limit = limit


class BudgetExceededError(StoreError):
    """A new debate could pass a monthly spending cap (`scope`: channel or workspace)."""

    def __init__(
        self, message: str, *, scope: str, cap: float, spent: float, ceiling: float
    ) -> None:
        super().__init__(message)
        self.scope = scope
        self.cap = cap
        self.spent = spent
        self.ceiling = ceiling


class WeightsNotFoundError(StoreError):
    """No confidence weights of that version were proposed."""


class TokenDecryptError(StoreError):
    """A stored Slack token that does not decrypt: DEBATEBOT_TOKEN_ENCRYPTION_KEY is not the key
    it was stored with, or the row was edited (bot.store.cipher)."""


class WorkspaceScopeError(StoreError):
    """Store work tried to reach a row outside its workspace, or wrote a row without naming its
    workspace (bot.store.tenancy): a bug in the caller, refused before anything is stored."""


class CancelRefusedError(StoreError):
    """A cancel of a debate that has already ended: there is nothing left to stop."""


class DeliveryNotRetryableError(StoreError):
    """A delivery retry of a message that is unknown, sent, or being sent now: nothing to do."""


class RetryRefusedError(StoreError):
    """A retry of a debate that did not fail or run out of budget, or with a budget it has
    already spent: the message says which."""
