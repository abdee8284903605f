"""Waiting: for work or a stop signal, and out a database outage without flooding the log.

A loop that meets the same failure every poll would log it every poll. `OutagePause` waits
longer after each consecutive failure (1 s, 2 s, 4 s … up to a minute), logs a failure when it
starts or changes and then only at each backoff doubling, and logs once when the database
answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging


class OutagePause:
    def __init__(self, what: str, *, base_s: float = 1.0, max_s: float = 60.0) -> None:
        self.what = what
        self.base_s = base_s
        self.max_s = max_s
        self.failures = 0
        self._last = ""

    async def failed(self, error: Exception, stop: asyncio.Event, log: logging.Logger) -> None:
        """Log (sparingly) and wait before the next try, or until `stop` is set."""
        self.failures += 1
        delay = min(self.max_s, self.base_s * 2.0 ** (self.failures - 1))
        message = str(error)
        if message != self._last or delay < self.max_s:
            log.error("%s: %s; next try in %.0fs", self.what, message, delay)
            self._last = message
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)

    def succeeded(self, log: logging.Logger) -> None:
        if self.failures:
            log.info("%s: the database answers again after %d failure(s)", self.what, self.failures)
        self.failures = 0
        self._last = ""


async def idle(stop: asyncio.Event, wake: asyncio.Event, timeout_s: float) -> None:
    """Wait until `stop` or `wake` is set, or `timeout_s` passes; then clear `wake`."""
    waits = [asyncio.create_task(stop.wait()), asyncio.create_task(wake.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
    wake.clear()
