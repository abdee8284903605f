"""Slack's limits: 429 storms with Retry-After, per-channel pacing, API errors in the thread."""

from __future__ import annotations

import itertools

from tests.e2e.conftest import CHANNEL, BotFactory
from tests.e2e.slack_emulator import Fault
from tests.helpers import DebateScript, reply_for

ANOTHER = reply_for("moderator", recommend_another_round=True)


async def test_a_429_storm_still_delivers_every_round_in_order(start_bot: BotFactory) -> None:
    bot = await start_bot(DebateScript(moderator=[ANOTHER, ANOTHER, ANOTHER]))
    storm = [Fault(status=429, retry_after=1), None] * 5
    bot.emulator.fail("chat.postMessage", *storm)
    bot.emulator.fail("chat.update", Fault(status=429, retry_after=1))

    await bot.driver.command("Should we adopt ADR-042? --rounds 3")

    [debate] = await bot.finished()
    assert debate.thread_ts is not None
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, debate.thread_ts)]
    assert thread[:4] == ["Round 1 of 3", "Round 2 of 3", "Round 3 of 3", "Verdict: revise (0.05)"]
    assert thread[4].startswith(":receipt: Receipt of debate #1 as issued")  # the file's share
    assert thread[5] == "Review needed for debate #1"
    posts = bot.emulator.calls_of("chat.postMessage", ok_only=False)
    limited = [i for i, call in enumerate(posts) if call.status == 429]
    assert len(limited) == 5
    for i in limited:
        # The retry waited at least Retry-After (a lower bound, safe on a slow machine).
        assert posts[i + 1].at - posts[i].at >= 1.0
    chat = [m for m in bot.emulator.posted(CHANNEL) if not m.get("upload")]
    assert len(chat) == len([c for c in posts if c.status == 200])


async def test_messages_to_one_channel_are_paced(start_bot: BotFactory) -> None:
    bot = await start_bot(post_interval_s=0.25)

    await bot.driver.command("Should we adopt ADR-042?")

    await bot.finished()
    writes = [
        c
        for c in bot.emulator.calls
        if c.method in ("chat.postMessage", "chat.update") and c.params.get("channel") == CHANNEL
    ]
    assert len(writes) >= 5
    gaps = [b.at - a.at for a, b in itertools.pairwise(writes)]
    assert min(gaps) >= 0.25


async def test_a_refused_round_is_surfaced_in_the_thread_and_the_debate_still_finishes(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    # The parent posts; the round message is refused by Slack, and so is its smaller re-split.
    refused = Fault(status=200, error="invalid_blocks")
    bot.emulator.fail("chat.postMessage", None, refused, refused)

    await bot.driver.command("Should we adopt ADR-042?")

    [debate] = await bot.finished()
    assert debate.outcome == "COMPLETE"
    assert debate.thread_ts is not None
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, debate.thread_ts)]
    assert any("could not be posted here (invalid_blocks)" in t for t in thread)
    assert any(t.startswith("Verdict") for t in thread)
