"""debatebot in Slack's assistant pane: suggested prompts when it opens, a message that starts a
debate in the assistant thread (titled after the question, run as an agent session: processing,
then active), the
rounds and verdict in that thread, and the review request in the channel the person picked or the
workspace's review channel."""

from __future__ import annotations

from typing import Any

from bot.messages import helptext
from bot.slack import assistant
from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM
from tests.e2e.conftest import Bot, BotFactory
from tests.e2e.slack_emulator import BOT_USER

DM = "D0ALICE1"
USER = "UALICE"
QUESTION = "Should we move billing retries from cron jobs to a message queue?"


def assistant_thread(bot: Bot) -> str:
    """The root Slack makes for an assistant thread; the thread hangs off it."""
    return bot.emulator.seed_message(DM, "", user=BOT_USER)


def thread(bot: Bot) -> list[dict[str, Any]]:
    [root] = [m for m in bot.emulator.messages.get(DM, []) if m.get("user") == BOT_USER][:1]
    return [m for m in bot.emulator.in_thread(DM, root["ts"]) if m["ts"] != root["ts"]]


async def ask(bot: Bot, text: str, root: str) -> None:
    reply = await bot.driver.assistant_message(
        text, channel=DM, thread_ts=root, ts=bot.emulator.next_ts(), user=USER
    )
    assert reply.status == 200


async def test_opening_the_assistant_offers_suggested_prompts(start_bot: BotFactory) -> None:
    bot = await start_bot()
    root = assistant_thread(bot)
    await bot.driver.assistant_opened(channel=DM, thread_ts=root, user=USER)
    [call] = await bot.wait_for(
        lambda: bot.emulator.assistant_calls("assistant.threads.setSuggestedPrompts"),
        "the suggested prompts",
    )
    assert (call["channel_id"], call["thread_ts"]) == (DM, root)
    titles = [p["title"] for p in call["prompts"]]
    assert titles == [
        "Debate this decision",
        "Review an ADR (paste it)",
        assistant.PROTOCOL_QUESTION,
    ]
    greeting = await bot.wait_for(lambda: thread(bot), "the greeting")
    assert greeting[0]["text"] == assistant.GREETING

    await ask(bot, assistant.PROTOCOL_QUESTION, root)
    await bot.wait_for(
        lambda: any(m["text"] == helptext.protocol_advice() for m in thread(bot)), "the advice"
    )
    await ask(bot, assistant.ADR_REQUEST, root)
    await bot.wait_for(
        lambda: any(m["text"] == assistant.PASTE_THE_ADR for m in thread(bot)), "the ask to paste"
    )
    assert bot.debates() == [], "neither prompt is a debate"


async def test_a_message_debates_in_the_assistant_thread(start_bot: BotFactory) -> None:
    llm = SchemaFillingLLM(seed=3, script=CANNED_DEBATE_REPLIES, delay_s=0.15)
    bot = await start_bot(llm=llm)
    root = assistant_thread(bot)
    await ask(bot, f"{QUESTION} --protocol structured", root)
    [debate] = await bot.finished()
    assert (debate.source, debate.channel_id, debate.thread_ts) == ("assistant", DM, root)

    [title] = bot.emulator.assistant_calls("assistant.threads.setTitle")
    assert (title["title"], title["thread_ts"]) == (QUESTION, root)
    session = bot.emulator.agent_sessions.sessions[(DM, root)]
    assert session.title == f"Debate #1: {QUESTION}"
    assert session.statuses[0] == "processing"
    assert session.statuses[-1] == "active", "the session leaves processing when it ends"
    assert bot.emulator.assistant_calls("assistant.threads.setStatus") == [], "sessions replace it"

    texts = [m["text"] for m in thread(bot)]
    assert texts[0].startswith("Debate #1")
    assert "Openings \u00b7 phase 1 of 4" in texts
    assert "The judge's scores \u00b7 phase 4 of 4" in texts
    assert any(t.startswith("Verdict") for t in texts)


async def test_an_assistant_debate_escalates_to_the_workspace_review_channel(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(review_channel="CREVIEWS")
    # The canned debate escalates: its independent judge does not reach `revise`.
    await ask(bot, "Should we adopt ADR-042?", assistant_thread(bot))
    [debate] = await bot.finished()
    assert debate.review_channel_id == "CREVIEWS"
    [request] = [m for m in bot.emulator.posted("CREVIEWS") if m["text"].startswith("Review")]
    assert "thread_ts" not in request, "a top-level post in the review channel"
    assert "Should we adopt ADR-042?" in str(request["blocks"])
    assert not any(m["text"].startswith("Review") for m in thread(bot))


async def test_the_person_picks_the_review_channel(start_bot: BotFactory) -> None:
    bot = await start_bot(review_channel="CREVIEWS")
    await ask(
        bot, "Should we adopt ADR-042? --review-in <#CARCHREV|arch-reviews>", assistant_thread(bot)
    )
    await bot.finished()
    assert [m["text"] for m in bot.emulator.posted("CARCHREV")] == ["Review needed for debate #1"]
    assert bot.emulator.posted("CREVIEWS") == []


async def test_a_review_channel_the_bot_cannot_post_in_is_refused_up_front(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.emulator.outside.add("CSECRET1")
    await ask(bot, "Should we adopt ADR-042? --review-in <#CSECRET1|secret>", assistant_thread(bot))
    refusal = await bot.wait_for(
        lambda: [m for m in thread(bot) if m["text"].startswith(":warning:")], "the refusal"
    )
    assert "not in this channel" in refusal[0]["text"]
    assert bot.debates() == []


async def test_the_thread_title_and_status_are_escaped_like_messages(start_bot: BotFactory) -> None:
    bot = await start_bot()
    root = assistant_thread(bot)
    hostile = "Adopt <!here> <@U123> <https://evil.example|docs>?"
    await ask(bot, hostile, root)
    await bot.finished()

    [title] = bot.emulator.assistant_calls("assistant.threads.setTitle")
    assert "<" not in title["title"]
    assert "&lt;!here&gt;" in title["title"]
    [session] = bot.emulator.agent_sessions.sessions.values()
    assert "<" not in session.title
    assert "&lt;!here&gt;" in session.title
