"""The store's errors; each says what to do about it."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the store's errors."""


class DatabaseUnavailableError(StoreError):
    """The database cannot be reached or stayed locked past the timeout."""


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
