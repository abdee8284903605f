"""Random Slack fault schedules during debates (seeded, bounded), then the invariants:

- every message a debate owes is delivered exactly once, in order in its thread, once the faults
  stop;
- a verdict that escalates always has its escalation row and its delivered review request;
- no owed message is left pending or given up.

Faults are the transient kinds Slack produces (5xx with Slack's JSON or a proxy's HTML page, 429
with Retry-After, `internal_error` with 200, a hang past the client's timeout), on
`chat.postMessage`, `chat.update` or any method, for the next N calls or for a window of time,
starting at random moments of the debates.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlmodel import select

from bot.store import channels, endings, reviews
from bot.store.db import session_scope
from bot.store.outbox_tables import Outbox
from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM
from tests.e2e.conftest import ADMIN, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_protocol_threads import COMMANDS, expected_titles, result_of
from tests.helpers import DebateScript, reply_for

SCHEDULES = range(6)
CHANNELS = ("CALPHA", "CBETA")
ANOTHER = reply_for("moderator", recommend_another_round=True)


def random_fault(rng: random.Random) -> Fault:
    kind = rng.choice(["500", "502-html", "429", "internal_error", "hang"])
    if kind == "500":
        return Fault(status=500, error="internal_error")
    if kind == "502-html":
        return Fault(status=502, html=True)
    if kind == "429":
        return Fault(status=429, retry_after=1)
    if kind == "internal_error":
        return Fault(status=200, error="internal_error")
    return Fault(status=500, hang_s=1.5)


async def inject(bot: Bot, rng: random.Random) -> None:
    """Three to six faults, each at a random moment in the first few seconds."""
    for _ in range(rng.randint(3, 6)):
        await asyncio.sleep(rng.uniform(0.0, 1.5))
        method = rng.choice(["chat.postMessage", "chat.postMessage", "chat.update", "*"])
        fault = random_fault(rng)
        if rng.random() < 0.5:
            bot.emulator.fail_for(method, fault, seconds=rng.uniform(0.5, 3.0))
        else:
            bot.emulator.fail(method, *([fault] * rng.randint(1, 4)))


@pytest.mark.parametrize("seed", SCHEDULES)
async def test_owed_messages_survive_any_transient_fault_schedule(
    start_bot: BotFactory, seed: int
) -> None:
    rng = random.Random(seed)
    bot = await start_bot(DebateScript(moderator=[ANOTHER, ANOTHER]), slack_timeout_s=1.0)
    bot.llm.delay_s = 0.05
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        for channel in CHANNELS:
            channels.save_channel_settings(
                session, channel_id=channel, updated_by=ADMIN, values={"reviewers": [REVIEWER]}
            )
    faults = asyncio.create_task(inject(bot, rng))
    for channel in CHANNELS:
        await bot.driver.command("Should we adopt ADR-042? --rounds 2", channel=channel)
    await faults
    # The queued faults of a method that was not called stay armed: clear them so "once the
    # faults stop" holds, as it does when Slack recovers.
    await asyncio.sleep(3.0)
    bot.emulator.heal()

    debates = await bot.finished(count=len(CHANNELS), limit_s=120)

    ids = [d.id for d in debates if d.id is not None]
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        rows = list(session.exec(select(Outbox)))
        escalations = {i: reviews.escalation_for(session, debate_id=i) for i in ids}
        verdicts = {i: endings.verdict_for(session, debate_id=i) for i in ids}
    assert {r.state for r in rows} <= {"sent"}, [(r.key, r.state, r.last_error) for r in rows]
    for debate in debates:
        assert debate.id is not None
        channel = debate.channel_id or ""
        top = [m for m in bot.emulator.posted(channel) if "thread_ts" not in m]
        assert len(top) == 1, "one parent, posted once"
        assert top[0]["ts"] == debate.thread_ts
        assert "Done" in str(top[0]["blocks"])
        thread = [m["text"] for m in bot.emulator.in_thread(channel, debate.thread_ts or "")]
        receipt = f":receipt: Receipt of debate #{debate.id} as issued, signed with key"
        assert [receipt if text.startswith(receipt) else text for text in thread] == [
            "Round 1 of 2",
            "Round 2 of 2",
            "Verdict: revise (0.05)",
            receipt,  # the signed receipt, shared as a file (tests/e2e/test_receipt_files.py)
            f"Review needed for debate #{debate.id}",
        ]
        verdict = verdicts[debate.id]
        assert verdict is not None
        assert verdict.escalate
        escalation = escalations[debate.id]
        assert escalation is not None
        assert (
            escalation.message_ts
            == bot.emulator.in_thread(channel, debate.thread_ts or "")[-1]["ts"]
        )


@pytest.mark.parametrize(
    ("seed", "protocol"),
    [(11, "stances"), (12, "consensus"), (13, "structured"), (14, "panel")],
)
async def test_every_protocols_rounds_survive_a_fault_schedule(
    start_bot: BotFactory, seed: int, protocol: str
) -> None:
    """Each protocol's round and phase messages, under random faults: every one delivered
    exactly once, in order, with nothing left owed."""
    rng = random.Random(seed)
    llm = SchemaFillingLLM(seed=seed, script=CANNED_DEBATE_REPLIES, delay_s=0.05)
    bot = await start_bot(llm=llm, slack_timeout_s=1.0)
    faults = asyncio.create_task(inject(bot, rng))
    for channel in CHANNELS:
        await bot.driver.command(f"Should we adopt ADR-042? {COMMANDS[protocol]}", channel=channel)
    await faults
    await asyncio.sleep(3.0)
    bot.emulator.heal()

    debates = await bot.finished(count=len(CHANNELS), limit_s=120)

    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        rows = list(session.exec(select(Outbox)))
    assert {r.state for r in rows} <= {"sent"}, [(r.key, r.state, r.last_error) for r in rows]
    for debate in debates:
        channel = debate.channel_id or ""
        top = [m for m in bot.emulator.posted(channel) if "thread_ts" not in m]
        assert len(top) == 1, "one parent, posted once"
        thread = [m["text"] for m in bot.emulator.in_thread(channel, debate.thread_ts or "")]
        rounds = [t for t in thread if not t.startswith(("Verdict", "Review", ":"))]
        assert rounds == expected_titles(result_of(bot, debate.id or 0))
        assert len([t for t in thread if t.startswith("Verdict")]) == 1
