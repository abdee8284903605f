"""A post Slack took whose answer never reached the bot (a 5xx, a timeout, a dropped answer after
Slack stored the message) is not posted twice, over both transports: the next send looks for it
in the thread (or, for a parent, the channel) by the key its metadata carries, and records the
copy it finds. A lookup Slack cannot answer waits for a retry instead of posting blind.

Each case loses the answer of one kind of message: the parent, a question part, a round, the
verdict, the review request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from bot.store import channels
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox, OutboxState
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Call, Fault, SlackEmulator
from tests.e2e.test_socket_mode import command, socket_bot, until

LONG_QUESTION = "Should we adopt ADR-042? " + "Context that runs long. " * 160
"""Longer than the parent shows: the rest goes to the thread as question parts."""

KINDS: dict[str, Callable[[Call], bool]] = {
    "parent": lambda call: not call.params.get("thread_ts"),
    "question part": lambda call: str(call.params.get("text", "")).startswith("The full question"),
    "round": lambda call: str(call.params.get("text", "")).startswith("Round 1"),
    "verdict": lambda call: str(call.params.get("text", "")).startswith("Verdict"),
    "review request": lambda call: "Review needed" in str(call.params.get("text", "")),
}
"""Which post of the debate each case loses the answer of."""
LOST = [Fault(applied=True, status=503), Fault(applied=True, hang_s=4.0)]
"""How the answer is lost: Slack answers 503 after storing the message, or holds the answer past
the client's timeout (`slack_timeout_s`, 2 s)."""
TRANSPORTS = ("http", "socket")


@dataclass
class Running:
    """The bot over one transport: the emulator, its store, and how a person asks a question."""

    emulator: SlackEmulator
    engine: Engine
    ask: Callable[[str], Awaitable[Any]]


def prepare(engine: Engine) -> None:
    """Every verdict asks the channel's reviewer for a review."""
    with session_scope(engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by=ADMIN,
            values={"reviewers": [REVIEWER], "threshold": 0.99},
        )


@pytest.fixture(params=TRANSPORTS)
async def running(
    request: pytest.FixtureRequest, start_bot: BotFactory, tmp_path: Path
) -> AsyncIterator[Running]:
    if request.param == "http":
        bot = await start_bot(outbox_backoff_max_s=0.5)
        prepare(bot.engine)
        yield Running(bot.emulator, bot.engine, bot.driver.command)
        return
    asked = 0
    async with socket_bot(
        tmp_path, admins={ADMIN}, outbox_backoff_max_s=0.5, slack_timeout_s=2.0
    ) as socket:
        prepare(socket.engine)

        async def ask(text: str) -> None:
            nonlocal asked
            asked += 1
            await socket.emulator.push("slash_commands", command(text, asked))

        yield Running(socket.emulator, socket.engine, ask)


def settled(engine: Engine) -> list[Debate] | None:
    """The debates, once each finished and nothing is owed any more."""
    with session_scope(engine, workspace=WORKSPACE) as session:
        debates = list(session.exec(select(Debate)))
        owed = session.exec(
            select(Outbox).where(col(Outbox.state).in_((OutboxState.PENDING, OutboxState.SENDING)))
        ).all()
    if debates and all(d.state == "finished" for d in debates) and not owed:
        return debates
    return None


@pytest.mark.parametrize("lost", LOST, ids=["5xx", "timeout"])
@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_post_whose_answer_was_lost_is_not_posted_twice(
    running: Running, kind: str, lost: Fault, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    emulator = running.emulator
    emulator.history_page_cap = 15  # an app outside the Slack Marketplace
    emulator.fail("chat.postMessage", Fault(**{**vars(lost), "when": KINDS[kind]}))
    await running.ask(LONG_QUESTION)
    [debate] = await until(lambda: settled(running.engine), "the debate, delivered", 90)

    # The lost answer happened: Slack stored the message and the bot never heard so.
    [lost_call] = [
        c
        for c in emulator.calls_of("chat.postMessage", ok_only=False)
        if c.status != 200 and c.answer is not None and c.answer.get("ok")
    ]
    assert KINDS[kind](lost_call)
    lost_ts = lost_call.answer["ts"] if lost_call.answer else ""

    # Slack holds each message once, and the store records the one Slack took first.
    top = [m for m in emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert len(top) == 1, [m["text"][:60] for m in top]
    assert debate.thread_ts == top[0]["ts"]
    thread = emulator.in_thread(CHANNEL, debate.thread_ts)
    texts = [m["text"] for m in thread]
    assert len(texts) == len(set(texts)), texts
    held = {m["ts"] for m in emulator.posted(CHANNEL)}
    assert lost_ts in held
    with session_scope(running.engine, workspace=WORKSPACE) as session:
        rows = list(session.exec(select(Outbox).where(Outbox.debate_id == debate.id)))
    assert all(r.state == OutboxState.SENT for r in rows), [(r.key, r.state) for r in rows]
    recorded = {ts for r in rows for _, ts in r.deliveries}
    assert lost_ts in recorded
    assert sum("Verdict" in t for t in texts) == 1
    assert sum("Review needed" in t for t in texts) == 1
    assert sum(t.startswith("The full question") for t in texts) >= 1
    lookups = [
        c
        for c in emulator.calls_of("conversations.history")
        + emulator.calls_of("conversations.replies")
        if c.params.get("include_all_metadata") in ("1", "true", True)
    ]
    assert lookups, "the copy was looked for"
    assert any("was posted before" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "refusal",
    [Fault(status=429, retry_after=1), Fault(status=503), Fault(applied=True, hang_s=4.0)],
    ids=["rate-limited", "5xx", "timeout"],
)
async def test_a_lookup_slack_cannot_answer_waits_instead_of_posting_blind(
    running: Running, refusal: Fault
) -> None:
    """The verdict's answer is lost; the first lookups for it fail (outside the Marketplace,
    `conversations.replies` allows one call a minute): the verdict waits and is looked for
    again, and is still not posted twice."""
    emulator = running.emulator
    emulator.fail("chat.postMessage", Fault(applied=True, status=503, when=KINDS["verdict"]))
    emulator.fail("conversations.replies", refusal, refusal)
    await running.ask("Should we adopt ADR-042?")
    [debate] = await until(lambda: settled(running.engine), "the debate, delivered", 90)
    assert debate.thread_ts is not None
    texts = [m["text"] for m in emulator.in_thread(CHANNEL, debate.thread_ts)]
    assert sum(t.startswith("Verdict") for t in texts) == 1, texts
    replies = emulator.calls_of("conversations.replies", ok_only=False)
    assert [c.status == 200 for c in replies][-3:] == [False, False, True]
