"""The assistant's Slack calls failing: what the person still gets.

- suggested prompts refused (HTTP 500): the greeting is there, the event is acknowledged;
- the thread title refused: the debate runs and is posted whole;
- where agent sessions are not available (the app not declared an agent), the status line down
  for a while (5xx), or refused for good: the debate runs, every round and the verdict are
  posted, and the status comes back (or is given up) without blocking anything;
- the review channel lost while the debate runs: the review request comes by DM instead.
"""

from __future__ import annotations

from sqlmodel import select

from bot.messages.sessions import SESSION_STATUS
from bot.slack import assistant
from bot.store.db import session_scope
from bot.store.outbox_tables import Outbox
from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM
from tests.e2e.conftest import Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_assistant import DM, USER, ask, assistant_thread, thread

STATUS = "assistant.threads.setStatus"


def fake() -> SchemaFillingLLM:
    return SchemaFillingLLM(seed=3, script=CANNED_DEBATE_REPLIES, delay_s=0.2)


def status_row(bot: Bot) -> Outbox:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return session.exec(select(Outbox).where(Outbox.key == SESSION_STATUS)).one()


async def test_refused_prompts_still_greet(start_bot: BotFactory) -> None:
    bot = await start_bot()
    bot.emulator.fail("assistant.threads.setSuggestedPrompts", Fault(status=500))
    root = assistant_thread(bot)
    reply = await bot.driver.assistant_opened(channel=DM, thread_ts=root, user=USER)
    assert reply.status == 200
    greeting = await bot.wait_for(lambda: thread(bot), "the greeting")
    assert greeting[0]["text"] == assistant.GREETING
    assert bot.emulator.assistant_calls("assistant.threads.setSuggestedPrompts") == []


async def test_a_refused_title_leaves_the_debate_whole(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=fake())
    bot.emulator.fail("assistant.threads.setTitle", Fault(error="invalid_arguments"))
    await ask(bot, "Should we adopt ADR-042? --protocol structured", assistant_thread(bot))
    await bot.finished()
    texts = [m["text"] for m in thread(bot)]
    assert "The judge's scores \u00b7 phase 4 of 4" in texts
    assert any(t.startswith("Verdict") for t in texts)


async def test_a_status_outage_is_waited_out(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=fake())
    bot.emulator.agent_sessions.declared = False
    bot.emulator.fail_for(STATUS, Fault(status=503, error="service_unavailable"), seconds=1.5)
    await ask(bot, "Should we adopt ADR-042? --protocol structured", assistant_thread(bot))
    await bot.finished()
    texts = [m["text"] for m in thread(bot)]
    assert any(t.startswith("Verdict") for t in texts)
    statuses = [c["status"] for c in bot.emulator.assistant_calls(STATUS)]
    assert statuses[-1] == "", "after the outage the status is still cleared at the end"
    assert status_row(bot).state == "sent"


async def test_a_refused_status_is_given_up_and_nothing_else_is(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=fake())
    bot.emulator.agent_sessions.declared = False
    bot.emulator.fail_for(STATUS, Fault(error="not_allowed_token_type"), seconds=600)
    await ask(bot, "Should we adopt ADR-042? --protocol structured", assistant_thread(bot))
    await bot.finished()
    texts = [m["text"] for m in thread(bot)]
    assert texts[0].startswith("Debate #1")
    assert "Openings \u00b7 phase 1 of 4" in texts
    assert any(t.startswith("Verdict") for t in texts)
    assert bot.emulator.assistant_calls(STATUS) == []
    row = status_row(bot)
    assert row.state == "failed"
    assert "not_allowed_token_type" in (row.last_error or "")


async def test_a_lost_review_channel_sends_the_review_request_by_dm(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(review_channel="CREVIEWS")
    bot.llm.delay_s = 0.3
    await ask(bot, "Should we adopt ADR-042?", assistant_thread(bot))  # the canned one escalates
    await bot.wait_for(bot.debates, "the queued debate")
    bot.emulator.outside.add("CREVIEWS")  # the bot is removed from it while the debate runs
    await bot.finished()
    assert bot.emulator.posted("CREVIEWS") == []
    dms = bot.emulator.dms(USER)
    assert any("Review needed for debate #1" in m["text"] for m in dms)
