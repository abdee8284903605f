"""A lane's pace: one debate's messages of a kind go at most every so often, so what is written
while the lane waits is coalesced into one write, within the channel's write budget."""

from __future__ import annotations

import asyncio
import math


class Pace:
    """When each debate's lane last wrote, and the wait before it may write again."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._wrote_at: dict[int, float] = {}

    async def wait(self, debate_id: int, *, early_s: float = 0.0) -> None:
        """Sleep until the debate's lane may write again (at once if it has not written), or
        `early_s` before."""
        loop = asyncio.get_running_loop()
        wait = self._wrote_at.get(debate_id, -math.inf) + self.interval_s - early_s
        if wait > loop.time():
            await asyncio.sleep(wait - loop.time())

    def wrote(self, debate_id: int) -> None:
        self._wrote_at[debate_id] = asyncio.get_running_loop().time()

    def forget_before(self, horizon: float) -> None:
        """Forget the writes before `horizon` (loop time): their pace no longer matters."""
        self._wrote_at = {d: at for d, at in self._wrote_at.items() if at > horizon}
