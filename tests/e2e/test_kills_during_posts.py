"""SIGKILLs while Slack holds a post's answer (seeded, bounded): two `debatebot worker` processes
deliver the messages of debates asked one after another; each kill picks, at random, one of the
next few posts a worker sends, lets Slack store it, holds Slack's answer, and SIGKILLs that
worker while it waits for it, then starts another. Whoever sends the message again (a worker,
or `serve`, once the dead worker's claim lapsed) must find the copy Slack took instead of posting
it twice: no message of the bot's is in Slack twice, and every one is recorded.

`KILLS` kills a run (3 in CI; a hold no worker's post meets within a minute is skipped, at most
`KILLS` more times); set DEBATEBOT_TEST_POST_KILLS for more by hand, with `-s` to see the count,
e.g. 50:

    DEBATEBOT_TEST_POST_KILLS=50 python -m pytest tests/e2e/test_kills_during_posts.py -s -n 0
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from bot.store import channels
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateState
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import EVERY_WORKSPACE
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Call, Fault
from tests.worker_fleet import WorkerFleet

KILLS = int(os.environ.get("DEBATEBOT_TEST_POST_KILLS", "3"))
SEED = int(os.environ.get("DEBATEBOT_TEST_POST_KILLS_SEED", "41"))
SLOTS = ("w1", "w2")
HOLD_S = 120.0
"""Slack holds the answer longer than any kill takes to come."""


def settled(bot: Bot, count: int) -> bool:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        debates = list(session.exec(select(Debate)))
        open_rows = session.exec(
            select(Outbox).where(col(Outbox.state).in_((OutboxState.PENDING, OutboxState.SENDING)))
        ).all()
    finished = len(debates) >= count and all(d.state == DebateState.FINISHED for d in debates)
    return finished and not open_rows


def duplicates(bot: Bot) -> list[tuple[str, str]]:
    """Each bot message Slack holds more than once (same thread, same text), once per repeat.
    Posts only: a shared file (the receipt) is delivered at least once (docs/architecture.md)."""
    seen = Counter((m.get("thread_ts") or "top", m["text"]) for m in posts(bot))
    return [key for key, count in seen.items() for _ in range(count - 1)]


def posts(bot: Bot) -> list[dict[str, Any]]:
    """The bot's chat posts, not the messages Slack makes when the bot shares a file."""
    return [m for m in bot.emulator.posted(CHANNEL) if not m.get("upload")]


def held(hold: Hold) -> list[Call]:
    return hold.held


def kind(text: str) -> str:
    """Which message a text is, for the count."""
    for prefix, name in (("Round", "round"), ("Verdict", "verdict"), ("Review", "review")):
        if text.startswith(prefix):
            return name
    return "parent" if text.startswith("Debate #") else "other"


class Hold:
    """Holds the answer of the `skip`+1-th post a worker sends from now (Slack stores it)."""

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self.held: list[Call] = []

    def __call__(self, call: Call) -> bool:
        if not call.caller or self.held:
            return False
        if self.skip:
            self.skip -= 1
            return False
        self.held.append(call)
        return True


async def test_kills_while_slack_holds_a_post_answer_repeat_no_message(
    start_bot: BotFactory, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    bot = await start_bot(
        worker_concurrency=0,  # the debates and most posts are the worker processes'
        worker_lease_s=2.0,
        worker_heartbeat_s=0.5,
        worker_poll_s=0.1,
        fake_delay_s=0.05,
        slack_timeout_s=1.0,
        max_debates_per_user=KILLS + 2,
        max_debates_per_channel=KILLS + 2,
    )
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by=ADMIN,
            values={"reviewers": [REVIEWER], "threshold": 0.99},
        )
    asked = 0
    kills = 0
    with WorkerFleet(
        bot.settings,
        tmp_path / "workers",
        env_for=lambda name: {"DEBATEBOT_SLACK_API_URL": bot.emulator.api_url_for(name)},
    ) as fleet:
        for slot in SLOTS:
            fleet.start(slot)
        for _ in range(2 * KILLS):  # bounded: a hold no worker's post meets is no kill
            if kills == KILLS:
                break
            hold = Hold(skip=rng.randint(0, 2))
            bot.emulator.fail("chat.postMessage", Fault(applied=True, hang_s=HOLD_S, when=hold))
            asked += 1
            reply = await bot.driver.command(f"Should we adopt ADR-{asked}?")
            assert reply.status == 200
            try:
                await bot.wait_for(partial(held, hold), "a worker's post held", limit_s=60)
            except AssertionError:
                bot.emulator.faults.clear()  # every post went out another way: no kill
                continue
            killed = hold.held[0].caller
            slot = next(s for s in SLOTS if s in fleet.live and fleet.name_of(s) == killed)
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            fleet.kill(slot)
            kills += 1
            fleet.start(slot)
        await bot.wait_for(lambda: settled(bot, asked), f"{asked} debates settled", limit_s=300)
        await asyncio.to_thread(fleet.stop)

    repeated = duplicates(bot)
    kinds = Counter(kind(text) for _, text in repeated)
    sys.stderr.write(
        f"\nSIGKILLs while Slack held a post's answer: {kills}; duplicates:"
        f" {len(repeated)} {dict(kinds)}\n"
    )
    assert kills >= 1, "no kill landed on a held post"
    assert not repeated, f"{len(repeated)} duplicate(s) over {kills} kills: {repeated}"
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        rows = list(session.exec(select(Outbox)))
    recorded = {ts for row in rows for _, ts in row.deliveries}
    assert {m["ts"] for m in posts(bot)} <= recorded, "each copy recorded"
