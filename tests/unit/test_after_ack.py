"""The work after an acknowledgement gives way to the answers being made, within a bound, and a
stop gives it its grace, then names what it cut short."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.slack.after_ack import AfterAck


async def test_work_waits_while_a_request_is_answered_and_until_the_door_settles() -> None:
    after = AfterAck(settle_s=0.02, max_defer_s=10.0)
    loop = asyncio.get_running_loop()
    events: list[tuple[str, float]] = []

    async def work() -> None:
        await after.turn()
        events.append(("work", loop.time()))

    with after.answering():
        task = after.start(work(), request="test request")
        await asyncio.sleep(0.05)
        with after.answering():
            await asyncio.sleep(0)
        events.append(("answered", loop.time()))
    await task

    assert [name for name, _ in events] == ["answered", "work"]
    assert events[1][1] - events[0][1] >= 0.02
    assert after.running == 0


async def test_waiting_work_starts_in_the_order_its_requests_were_answered() -> None:
    after = AfterAck(settle_s=0.01, max_defer_s=10.0)
    started: list[int] = []

    async def work(n: int) -> None:
        await after.turn()
        started.append(n)

    tasks = []
    for n in range(20):
        with after.answering():
            tasks.append(after.start(work(n), request=f"request {n}"))
            await asyncio.sleep(0)
    await asyncio.gather(*tasks)

    assert started == list(range(20))


async def test_work_runs_beside_answers_that_never_stop_after_the_bound() -> None:
    after = AfterAck(settle_s=0.0, max_defer_s=0.05)
    ran = asyncio.Event()

    async def work() -> None:
        await after.turn()
        ran.set()

    with after.answering():
        after.start(work(), request="test request")
        await asyncio.wait_for(ran.wait(), timeout=5)


async def test_nothing_waits_when_nothing_is_answered() -> None:
    after = AfterAck()

    await asyncio.wait_for(after.turn(), timeout=5)


async def test_a_stop_waits_within_its_grace_and_names_the_work_it_cuts_short(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = AfterAck()
    finished = asyncio.Event()

    async def quick() -> None:
        await asyncio.sleep(0.01)
        finished.set()

    async def stuck() -> None:
        await asyncio.Event().wait()

    after.start(quick(), request="quick request")
    after.start(stuck(), request="/debate by UBOB in CDEBATE")

    with caplog.at_level(logging.ERROR, logger="bot.slack.after_ack"):
        await after.drain(0.2)

    assert finished.is_set()
    assert after.running == 0
    [record] = caplog.records
    assert "/debate by UBOB in CDEBATE" in record.getMessage()
