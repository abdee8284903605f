"""From a linked pull request to the first round in the thread, on the fake model.

Starts `debatebot serve` as its own process (HTTP mode, fake provider, a migrated SQLite store,
no pacing) against the Slack emulator and the GitHub emulator on 127.0.0.1, turns on ADR
watching and pull request comments in a channel, then posts `--runs` messages each linking a
pull request that adds an ADR, one after another. For each, the time from the event's delivery
to the first round's message in its thread, and to the verdict comment on the pull request.
The fake model answers at once, so this is what the bot itself adds (reading the pull request
and its files through the API, queueing, the framing turn and one round, posting).

    .venv/bin/python -m benchmarks.linked_adr --runs 10
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from sqlmodel import Session

from benchmarks.ack_latency import SIGNING_SECRET, TOKEN, free_port, wait_healthy
from bot.store import channels
from bot.store.db import make_engine, upgrade
from tests.e2e.driver import SlackDriver
from tests.e2e.host_emulators import GitHubEmulator
from tests.e2e.slack_emulator import SlackEmulator

CHANNEL = "CADRS"
ADR = "# 12. Use PostgreSQL\n\n## Status\nProposed\n\n## Context\nx\n\n## Decision\ny\n"
GOAL_S = 5.0
"""What a person waiting in the thread should see: the first round within a few seconds when
the model is instant."""


async def until(predicate: object, limit_s: float = 60) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if predicate():  # type: ignore[operator]
            return time.perf_counter() - started
        await asyncio.sleep(0.01)
    raise RuntimeError("timed out")


async def main(runs: int) -> None:
    slack, github = SlackEmulator(), GitHubEmulator()
    await slack.start()
    await github.start()
    workdir = Path(tempfile.mkdtemp(prefix="debatebot-link-"))
    url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by="UADMIN",
            values={"adr_watch": True, "pr_comment": True},
        )
    engine.dispose()
    for n in range(runs):
        github.add_file("acme/orders", f"head{n}", "docs/adr/0012-postgres.md", ADR)
        github.add_pull(
            "acme/orders",
            n + 1,
            title=f"ADR 12 take {n}",
            body="Proposing ADR 12.",
            head=f"head{n}",
            files={"docs/adr/0012-postgres.md": "added"},
        )
    port = free_port()
    env = {
        **os.environ,
        "DEBATEBOT_SLACK_BOT_TOKEN": TOKEN,
        "DEBATEBOT_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "DEBATEBOT_SLACK_API_URL": slack.api_url,
        "DEBATEBOT_DATABASE_URL": url,
        "DEBATEBOT_PROVIDER": "fake",
        "DEBATEBOT_POST_INTERVAL_S": "0",
        "DEBATEBOT_WORKER_POLL_S": "0.05",
        "DEBATEBOT_OUTBOX_POLL_S": "0.05",
        "DEBATEBOT_GITHUB_URL": github.url,
        "DEBATEBOT_GITHUB_TOKEN": github.token,
        "DEBATEBOT_HTTP_HOST": "127.0.0.1",
        "DEBATEBOT_HTTP_PORT": str(port),
    }
    bot = Path(sys.executable).with_name("debatebot")
    process = await asyncio.create_subprocess_exec(
        str(bot),
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    to_round: list[float] = []
    to_comment: list[float] = []
    try:
        async with aiohttp.ClientSession() as session:
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{slack.url}/response", session)
            for n in range(runs):
                text = f"Please review <{github.url}/acme/orders/pull/{n + 1}>"
                ts = slack.seed_message(CHANNEL, text)
                started = time.perf_counter()
                await driver.event(
                    {
                        "type": "message",
                        "channel": CHANNEL,
                        "user": f"U{n}",
                        "text": text,
                        "ts": ts,
                        "channel_type": "channel",
                    }
                )
                await until(
                    lambda ts=ts: any(
                        m["text"].startswith("Round 1") for m in slack.in_thread(CHANNEL, ts)
                    )
                )
                to_round.append(time.perf_counter() - started)
                await until(lambda n=n: github.comments.get(("acme/orders", n + 1)))
                to_comment.append(time.perf_counter() - started)
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        await slack.stop()
        await github.stop()
    print(f"linked pull request -> first round in the thread, fake model, {runs} runs")
    print(
        f"to round 1: goal < {GOAL_S:.0f} s, measured median {statistics.median(to_round):.2f} s"
        f" (max {max(to_round):.2f} s)"
    )
    print(
        f"to the verdict comment on the pull request: median {statistics.median(to_comment):.2f} s"
        f" (max {max(to_comment):.2f} s)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    asyncio.run(main(parser.parse_args().runs))
