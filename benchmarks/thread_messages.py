"""What one debate of each protocol posts in Slack, and how often its parent is updated.

Starts `debatebot serve` as its own process (HTTP mode, the schema-filling fake model with a
per-call delay, Slack's pacing of one write a second per channel, the default status interval)
against the Slack emulator on 127.0.0.1 without Slack's streaming methods, so the parent's status
shows the progress (where Slack streams, the live plan does: `benchmarks.stream_plan` measures
that), runs one `/debate` per protocol, each in its own
channel, and prints per protocol: the messages posted (parent, rounds, verdict, review request),
their total characters (notification text plus block text), the biggest message, the parent's
updates with the shortest gap between two of them (goal: the status interval, 2 s, so the status
leaves the channel's write budget to the rounds), and the channel's writes per second while the
debate ran (goal: Slack's one a second).

    .venv/bin/python -m benchmarks.thread_messages --delay 0.3
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import sys
import tempfile
from pathlib import Path

import aiohttp

from benchmarks.ack_latency import free_port, wait_healthy
from benchmarks.outage_recovery import SIGNING_SECRET, start_serve, wait_until
from bot.messages.kit import block_chars
from bot.store.db import upgrade
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import SlackEmulator

QUESTION = "Should we move billing retries from cron jobs to a message queue?"
OPTIONS = {
    "adversarial": "--protocol adversarial --rounds 2",
    "stances": '--protocol stances --for "adopt it now" --against "wait a quarter"',
    "consensus": "--protocol consensus",
    "structured": "--protocol structured",
    "panel": "--protocol panel",
}
STATUS_INTERVAL_S = 2.0
WRITES_GOAL_PER_S = 1.0


def finished(emulator: SlackEmulator, channel: str) -> bool:
    posted = emulator.posted(channel)
    return any(m["text"].startswith("Verdict") for m in posted) and any(
        "thread_ts" not in m and "*Done*" in str(m["blocks"]) for m in posted
    )


async def start_protocol_bot(
    delay_s: float, *, streaming: bool, prefix: str, more: dict[str, str] | None = None
) -> tuple[SlackEmulator, asyncio.subprocess.Process, int, str]:
    """`debatebot serve` on a fresh SQLite store against the emulator (with or without chat
    streaming), the fake model at `delay_s` a call, room for one person's debate of each
    protocol at once (`more` sets other variables, or these otherwise): the emulator, the
    process, its port and the store's URL."""
    emulator = SlackEmulator(streaming=streaming)
    await emulator.start()
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    upgrade(url)
    port = free_port()
    log_level = os.environ.get("BENCH_LOG_LEVEL")
    extra = {
        "DEBATEBOT_FAKE_DELAY_S": str(delay_s),
        "DEBATEBOT_WORKER_CONCURRENCY": str(len(OPTIONS)),
        # One person asks all five at once, past the default of three in flight.
        "DEBATEBOT_MAX_DEBATES_PER_USER": str(len(OPTIONS)),
    }
    if log_level:
        extra["DEBATEBOT_LOG_LEVEL"] = log_level
    extra |= more or {}
    process = await start_serve(
        emulator, url, port, extra, stderr=None if log_level else asyncio.subprocess.DEVNULL
    )
    return emulator, process, port, url


async def run(delay_s: float) -> None:
    emulator, process, port, _url = await start_protocol_bot(
        delay_s, streaming=False, prefix="debatebot-threads-"
    )
    channels = {protocol: f"CTHREAD{n}" for n, protocol in enumerate(OPTIONS)}
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            for protocol, channel in channels.items():
                await driver.command(f"{QUESTION} {OPTIONS[protocol]}", channel=channel)
            try:
                await wait_until(
                    lambda: all(finished(emulator, c) for c in channels.values()),
                    300,
                    "every debate's verdict and final status",
                )
            except RuntimeError:
                for protocol, channel in channels.items():
                    texts = [m["text"][:60] for m in emulator.posted(channel)]
                    print(f"{protocol}: {texts}", file=sys.stderr)
                raise
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        await emulator.stop()

    print(f"one debate per protocol, fake model {delay_s}s per call, Slack pacing 1 write/s")
    print(
        f"{'protocol':<12} {'messages':>8} {'characters':>11} {'biggest':>8} {'updates':>8}"
        f" {'min gap s':>10} (goal >= {STATUS_INTERVAL_S:.0f}) {'writes/s':>9}"
        f" (goal <= {WRITES_GOAL_PER_S:.0f})"
    )
    for protocol, channel in channels.items():
        posted = emulator.posted(channel)
        sizes = [len(m["text"]) + block_chars(m["blocks"]) for m in posted]
        parent = next(m for m in posted if "thread_ts" not in m)
        calls = [
            c
            for c in emulator.calls
            if c.params.get("channel") == channel
            and c.method in ("chat.postMessage", "chat.update")
        ]
        updates = [
            c for c in calls if c.method == "chat.update" and c.params.get("ts") == parent["ts"]
        ]
        span = max(c.at for c in calls) - min(c.at for c in calls)
        gaps = [b.at - a.at for a, b in itertools.pairwise(updates)]
        writes = (len(calls) - 1) / span if span else 0.0
        if os.environ.get("BENCH_TRACE"):
            start = min(c.at for c in calls)
            for c in calls:
                print(f"  {c.at - start:6.1f} {c.method} {str(c.params.get('text'))[:50]}")
        gap = f"{min(gaps):.2f}" if gaps else "-"
        print(
            f"{protocol:<12} {len(posted):>8} {sum(sizes):>11,} {max(sizes):>8,}"
            f" {len(updates):>8} {gap:>10} {'':12} {writes:>9.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.3, help="fake model seconds per call")
    args = parser.parse_args()
    asyncio.run(run(args.delay))


if __name__ == "__main__":
    main()
