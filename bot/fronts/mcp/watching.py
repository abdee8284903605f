"""`debate://ID` change notifications for every debate, wherever it runs: a debate admitted
over MCP may be run by `debatebot worker`, `serve` or `web` in another process, which cannot
reach this server's listeners, so while anyone listens the store is read every `poll_s` and a
debate whose state or stored turns changed since the last read is announced as updated."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent

from bot.fronts.mcp.reading import Progress, Reader
from bot.store.errors import StoreError

log = logging.getLogger(__name__)


class CountingBus(InMemorySubscriptionBus):
    """The SDK's in-process bus, counting its listeners so the store is read only while
    someone listens."""

    def __init__(self) -> None:
        super().__init__()
        self.listening = 0

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.listening += 1
        done = False

        def once() -> None:
            nonlocal done
            if not done:
                done = True
                self.listening -= 1
                unsubscribe()

        return once


@dataclass
class DebateWatch:
    """Reads the open debates' progress while `bus` has listeners and publishes a change."""

    reader: Reader
    bus: CountingBus
    poll_s: float = 1.0
    seen: dict[int, Progress] | None = field(default=None, init=False)

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            if not self.bus.listening:
                self.seen = None  # nobody listened meanwhile: start again from what is stored
                continue
            try:
                await self.check()
            except StoreError as error:
                # Said once a poll while the store fails; the next poll tries again.
                log.warning("debate updates not read for MCP listeners: %s", error)

    async def check(self) -> None:
        """Publish each debate whose progress changed since the last check (the first only
        takes note, so a listener hears of changes, not of what was already there)."""
        tracked = set(self.seen or {})
        now = await asyncio.to_thread(self.reader.open_progress, tracked)
        if self.seen is not None:
            for debate_id in sorted(set(now) | tracked):
                if now.get(debate_id) != self.seen.get(debate_id):
                    await self.bus.publish(ResourceUpdated(uri=f"debate://{debate_id}"))
        # A debate that ended is reported once more (above), then no longer read.
        self.seen = {debate_id: p for debate_id, p in now.items() if not p.ended}
