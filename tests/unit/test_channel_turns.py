"""A turn's first words in the live plan take the channel's next write: they go before the
writes already waiting there, and a writer that waited out the channel's pace lets them go
first; everything else keeps its order and the channel's pace (issue 47: panel's first word)."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.messages.kit import Message
from bot.messages.plan import WRITING, first_words
from bot.slackweb.poster import SlackPoster


class HeldClient:
    """Records each write in the order Slack gets it; a post of "hold" waits for `release`."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        self.order.append(kwargs["text"])
        if kwargs["text"] == "hold":
            self.holding.set()
            await self.release.wait()
        return {"ok": True, "channel": kwargs["channel"], "ts": "1.1"}

    async def chat_appendStream(self, **kwargs: Any) -> dict[str, Any]:
        self.order.append("first words")
        return {"ok": True}


async def until_waiting(poster: SlackPoster, count: int) -> None:
    """One step of the loop: the writers just started reach the channel's queue."""
    await asyncio.sleep(0)
    assert len(poster._turns["C1"]._waiting) == count


async def words(poster: SlackPoster) -> None:
    async with poster.turn("C1", urgent=True):
        await poster.append_stream(channel="C1", ts="9.9", chunks=[])


async def test_first_words_go_before_the_writes_waiting_for_the_channel() -> None:
    client = HeldClient()
    poster = SlackPoster(client, interval_s=0)  # type: ignore[arg-type]
    held = asyncio.create_task(poster.post(channel="C1", message=Message("hold", [])))
    await client.holding.wait()
    status = asyncio.create_task(poster.post(channel="C1", message=Message("status", [])))
    post = asyncio.create_task(poster.post(channel="C1", message=Message("round", [])))
    await until_waiting(poster, 2)
    urgent = asyncio.create_task(words(poster))
    await until_waiting(poster, 3)

    client.release.set()
    await asyncio.gather(held, status, post, urgent)

    assert client.order == ["hold", "first words", "status", "round"]


async def test_a_writer_that_waited_out_the_pace_lets_first_words_go_first() -> None:
    paced = asyncio.Event()
    slept = asyncio.Event()
    now = [0.0]

    async def sleep(seconds: float) -> None:
        slept.set()
        await paced.wait()
        now[0] += seconds

    client = HeldClient()
    poster = SlackPoster(client, interval_s=1.0, sleep=sleep, clock=lambda: now[0])  # type: ignore[arg-type]
    await poster.post(channel="C1", message=Message("before", []))
    # The status holds the channel's turn, waiting out the second since the last write.
    status = asyncio.create_task(poster.post(channel="C1", message=Message("status", [])))
    await slept.wait()
    urgent = asyncio.create_task(words(poster))
    await until_waiting(poster, 1)

    paced.set()
    await asyncio.gather(status, urgent)

    assert client.order == ["before", "first words", "status"]


def test_first_words_are_a_turn_s_text_slack_does_not_show_yet() -> None:
    started = {"type": "task_update", "id": "t1", "status": "in_progress"}
    writing = {**started, "output": f"{WRITING}We should"}
    more = {**started, "output": f"{WRITING}We should adopt it"}

    assert first_words([started], [writing])
    assert first_words([], [writing])
    assert not first_words([writing], [more])
    assert not first_words([started], [started])
