"""A worker that dies mid-debate: the next one resumes without posting any message twice."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bot.settings import Settings
from bot.store import turns
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.wiring import build_services, build_worker
from engine.models import utcnow
from tests.e2e.conftest import CHANNEL, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.helpers import DebateScript, reply_for

ANOTHER = reply_for("moderator", recommend_another_round=True)


async def test_a_resumed_debate_posts_each_message_once(start_bot: BotFactory) -> None:
    # No in-process workers: the test runs its own two, one after the other.
    bot = await start_bot(DebateScript(moderator=[ANOTHER, ANOTHER]), worker_concurrency=0)
    bot.llm.delay_s = 0.1
    await bot.driver.command("Should we adopt ADR-042? --rounds 2")
    await bot.wait_for(bot.debates, "the queued debate")
    debate_services = build_services(Settings(provider="fake"), resolve_llm=lambda _model: bot.llm)
    first = build_worker(
        debate_services, bot.engine, worker_id="first", reporter=bot.runtime.notifier
    )
    running = asyncio.create_task(first.run_once())
    await bot.wait_for(
        lambda: any(m["text"] == "Round 1 of 2" for m in bot.emulator.posted(CHANNEL)), "round 1"
    )
    running.cancel()  # the worker dies in round 2, after round 1 was posted
    await asyncio.gather(running, return_exceptions=True)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        row = session.get(Debate, 1)
        assert row is not None
        row.lease_expires_at = utcnow() - timedelta(seconds=1)
        session.add(row)
        session.commit()
        stored = len(turns.turn_rows(session, debate_id=1))
    assert 5 <= stored < 9
    calls_before = len(bot.llm.calls)

    second = build_worker(
        debate_services, bot.engine, worker_id="second", reporter=bot.runtime.notifier
    )
    assert await second.run_once()

    [debate] = await bot.finished()
    assert debate.claims == 2
    texts = [m["text"] for m in bot.emulator.posted(CHANNEL)]
    assert texts.count("Round 1 of 2") == 1
    assert texts.count("Round 2 of 2") == 1
    assert len([t for t in texts if t.startswith("Debate #1")]) == 1
    assert len([t for t in texts if t.startswith("Verdict")]) == 1
    # Turns stored before the death were replayed, not asked again: the second worker made
    # exactly the calls for the turns that were missing (of ten: the framing, two rounds of
    # four, the independent judge).
    assert len(bot.llm.calls) - calls_before == 10 - stored
