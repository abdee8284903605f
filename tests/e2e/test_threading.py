"""Replies stay in their thread: a reply Slack stores outside it (answering `ok` without
`thread_ts`, reported when a thread's root was just deleted) is caught, removed, and the debate
goes on in a new thread under its parent posted again, never at the channel's top level; and a
debate whose thread opened with its parent shows its question once."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import CHANNEL, Bot, BotFactory


def reaction(ts: str) -> dict[str, Any]:
    return {
        "type": "reaction_added",
        "user": "UBOB",
        "reaction": "scales",
        "item": {"type": "message", "channel": CHANNEL, "ts": ts},
        "event_ts": "2.0",
    }


def top_level(bot: Bot) -> list[dict[str, Any]]:
    return [m for m in bot.emulator.messages.get(CHANNEL, []) if "thread_ts" not in m]


async def test_a_reply_slack_stores_outside_its_thread_moves_the_debate_to_a_new_thread(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    root = bot.emulator.seed_message(CHANNEL, "Proposal: drop the read replica to save $2k/month.")
    bot.emulator.unthreaded.add((CHANNEL, root))

    await bot.driver.event(reaction(root))
    [debate] = await bot.finished()

    # The stray reply was deleted; the one new top-level message is the parent posted again,
    # and every other message of the debate is in its thread.
    [stray] = bot.emulator.removed
    assert "thread_ts" not in stray
    tops = [m for m in top_level(bot) if m["ts"] != root]
    assert len(tops) == 1
    assert debate.thread_ts == tops[0]["ts"]
    thread = bot.emulator.in_thread(CHANNEL, tops[0]["ts"])
    assert any("Verdict of debate" in str(m["blocks"]) for m in thread)
    question_shown = [
        m for m in bot.emulator.posted(CHANNEL) if "drop the read replica" in str(m["blocks"])
    ]
    assert len(question_shown) == 1, "the question is shown once"


async def test_a_reaction_debate_whose_root_is_deleted_shows_its_question_once(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    root = bot.emulator.seed_message(CHANNEL, "Proposal: drop the read replica to save $2k/month.")
    bot.emulator.delete_message(CHANNEL, root)
    bot.emulator.messages[CHANNEL] = [
        {
            "type": "message",
            "user": "UALICE",
            "text": "Proposal: drop the read replica.",
            "ts": root,
        }
    ]

    await bot.driver.event(reaction(root))
    [debate] = await bot.finished()

    parents = [
        m for m in bot.emulator.posted(CHANNEL) if f"Debate #{debate.id}" in str(m["blocks"])
    ]
    assert len(parents) == 1, [m["text"] for m in parents]
    assert "thread_ts" not in parents[0]
