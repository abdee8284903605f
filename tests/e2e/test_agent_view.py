"""Slack's Agent messaging experience (`agent_view`): the Messages tab greets once and offers
suggested prompts, a message there debates itself in its own thread, and `app_context_changed`
is acknowledged without changing who reviews anything. The assistant-pane events keep working
(tests/e2e/test_assistant.py)."""

from __future__ import annotations

from bot.slack import assistant
from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM
from tests.e2e.conftest import BotFactory

DM = "DAGENT"
USER = "UALICE"


async def test_opening_the_messages_tab_offers_prompts_and_greets_once(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    assert (await bot.driver.messages_tab_opened(channel=DM, user=USER)).status == 200
    assert (await bot.driver.messages_tab_opened(channel=DM, user=USER)).status == 200

    calls = await bot.wait_for(
        lambda: (
            len(bot.emulator.assistant_calls("assistant.threads.setSuggestedPrompts")) >= 2
            and bot.emulator.assistant_calls("assistant.threads.setSuggestedPrompts")
        ),
        "the prompts",
    )
    assert all(c["channel_id"] == DM and "thread_ts" not in c for c in calls)
    assert [p["title"] for p in calls[0]["prompts"]] == [
        p["title"] for p in assistant.SUGGESTED_PROMPTS
    ]
    # The greeting follows the first opening's prompts, so it may come after the second's.
    greetings = await bot.wait_for(
        lambda: [m for m in bot.emulator.messages.get(DM, []) if m["text"] == assistant.GREETING],
        "the greeting",
    )
    assert len(greetings) == 1
    assert bot.debates() == []


async def test_a_message_in_the_messages_tab_debates_itself_in_its_own_thread(
    start_bot: BotFactory,
) -> None:
    llm = SchemaFillingLLM(seed=3, script=CANNED_DEBATE_REPLIES, delay_s=0.05)
    bot = await start_bot(llm=llm)
    ts = bot.emulator.seed_message(DM, "Should we adopt <!here> ADR-042?", user=USER)

    assert (
        await bot.driver.dm_message(
            "Should we adopt <!here> ADR-042?", channel=DM, ts=ts, user=USER
        )
    ).status == 200

    [debate] = await bot.finished()
    assert (debate.source, debate.channel_id, debate.thread_ts) == ("assistant", DM, ts)
    replies = bot.emulator.in_thread(DM, ts)
    assert any("Verdict of debate" in str(m["blocks"]) for m in replies)
    [title] = bot.emulator.assistant_calls("assistant.threads.setTitle")
    assert title["thread_ts"] == ts
    assert "<!here>" not in title["title"]


async def test_advice_in_the_messages_tab_is_given_in_the_message_s_thread(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    ts = bot.emulator.seed_message(DM, assistant.PROTOCOL_QUESTION, user=USER)
    await bot.driver.dm_message(assistant.PROTOCOL_QUESTION, channel=DM, ts=ts, user=USER)

    advice = await bot.wait_for(
        lambda: [m for m in bot.emulator.in_thread(DM, ts) if m["ts"] != ts], "the advice"
    )
    assert "adversarial" in advice[0]["text"]
    assert bot.debates() == []


async def test_a_context_change_is_acknowledged_and_changes_nothing(start_bot: BotFactory) -> None:
    bot = await start_bot()
    reply = await bot.driver.context_changed(user=USER, channel="CELSEWHERE")
    assert reply.status == 200
    assert bot.debates() == []
    assert bot.emulator.posted("CELSEWHERE") == []
