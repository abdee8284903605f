"""Whose write to one Slack channel goes next.

Slack allows about one message a second per channel, so the poster lets one writer at a time
into a channel (`SlackPoster.turn`). Writers wait in the order they came, except that an
urgent one (a turn's first words in the live plan) goes before every writer that is not: when
the channel frees, or when a writer that has waited out the channel's pace finds an urgent one
waiting, which then takes the slot in its place (`step_aside`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

URGENT, IN_ORDER = 0, 1


class ChannelTurns:
    """One channel's writers: the one writing, and the ones waiting, urgent ones first."""

    def __init__(self) -> None:
        self._busy = False
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def urgent_waiting(self) -> bool:
        return any(rank == URGENT and not granted.done() for rank, _, granted in self._waiting)

    async def enter(self, *, urgent: bool) -> int:
        """Wait for this writer's turn; its place in the order, kept should it step aside."""
        place = next(self._order)
        if not self._busy:
            self._busy = True
            return place
        await self._wait(URGENT if urgent else IN_ORDER, place, handing_over=False)
        return place

    async def step_aside(self, place: int) -> None:
        """Give the turn to the urgent writer waiting, and wait for this one's place again
        (ahead of the writers that came after it)."""
        await self._wait(IN_ORDER, place, handing_over=True)

    def leave(self) -> None:
        """The writer is done: the next one waiting goes, the urgent first."""
        while self._waiting:
            _rank, _place, granted = heapq.heappop(self._waiting)
            if not granted.done():
                granted.set_result(None)
                return
        self._busy = False

    async def _wait(self, rank: int, place: int, *, handing_over: bool) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, place, granted))
        if handing_over:
            self.leave()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                # The turn came just as the writer was cancelled: it passes to the next one.
                self.leave()
            raise
