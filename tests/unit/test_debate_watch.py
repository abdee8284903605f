"""`debate://ID` updates for debates run elsewhere (bot.fronts.mcp.watching): a change of state or
stored turns is published once; the store failing is a warning and the next read goes on."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
from mcp.server.subscriptions import ResourceUpdated, ServerEvent

from bot.fronts.mcp.reading import Progress, Reader
from bot.fronts.mcp.watching import CountingBus, DebateWatch
from bot.store.errors import DatabaseUnavailableError


class Store:
    """What the watch reads, one answer (or failure) a read; the last one repeated."""

    def __init__(self, *answers: dict[int, Progress] | Exception, reads: int) -> None:
        self.answers = list(answers)
        self.reads = 0
        self.wanted = reads
        self.done = asyncio.Event()

    def open_progress(self, also: set[int]) -> dict[int, Progress]:
        self.reads += 1
        if self.reads >= self.wanted:
            self.done.set()
        answer = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def watched(store: Store) -> list[ServerEvent]:
    bus = CountingBus()
    heard: list[ServerEvent] = []
    unsubscribe = bus.subscribe(heard.append)
    watch = DebateWatch(reader=cast(Reader, store), bus=bus, poll_s=0.001)
    task = asyncio.create_task(watch.run_forever())
    await asyncio.wait_for(store.done.wait(), 30)
    task.cancel()
    unsubscribe()
    assert bus.listening == 0
    return heard


RUNNING = Progress(state="running", turns=2, ended=False)
DONE = Progress(state="finished", turns=5, ended=True)


async def test_each_change_is_published_once_and_an_ended_debate_is_no_longer_read() -> None:
    store = Store({}, {1: RUNNING}, {1: RUNNING}, {1: DONE}, {}, reads=5)
    heard = await watched(store)
    assert [cast(ResourceUpdated, e).uri for e in heard] == ["debate://1", "debate://1"]


async def test_a_store_that_fails_is_a_warning_and_the_next_read_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failure = DatabaseUnavailableError("the database did not answer within 5 s")
    store = Store({}, failure, {1: RUNNING}, reads=4)
    with caplog.at_level(logging.WARNING):
        heard = await watched(store)
    assert [cast(ResourceUpdated, e).uri for e in heard] == ["debate://1"]
    warned: list[Any] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "debate updates not read for MCP listeners: the database did not answer within 5 s"
    ]
