"""Recovery after a Slack outage: how long after Slack comes back every owed message is out.

Starts `debatebot serve` as its own process (HTTP mode, fake provider with a per-call delay, one
in-process worker per debate, a migrated SQLite store, Slack's real pacing of one message per
second per channel) against the Slack emulator on 127.0.0.1, then in one run:

1. `--debates` `/debate` commands, one per channel, and waits for their parent messages;
2. an outage: every Slack method answers HTTP 500 (or, with `--fault token_revoked`, refuses
   the bot token) for `--outage` seconds, while the debates finish and owe their rounds,
   verdicts, review requests and status updates;
3. measures from the end of the outage until every debate's thread holds its round, verdict and
   review request and its parent shows the verdict.

Prints the recovery time beside its goal (at most one backoff cap, 30 s by default; for a
refused token, the token probe's cap of 15 s plus a few paced writes: 20 s) and the messages
delivered, and the same measured against the time the debates took.

    .venv/bin/python -m benchmarks.outage_recovery --debates 20 --outage 60
    .venv/bin/python -m benchmarks.outage_recovery --debates 10 --outage 60 --fault token_revoked
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from benchmarks.ack_latency import free_port, wait_healthy
from bot.store.db import upgrade
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import Fault, SlackEmulator

SIGNING_SECRET = "benchmark0signing0secret0value01"
TOKEN = "xoxb-1234-5678-benchmarktoken"
BACKOFF_CAP_S = 30.0
TOKEN_GOAL_S = 20.0
EXPECTED_THREAD = ("Round 1 of 1", "Verdict:", "Review needed")


def delivered(emulator: SlackEmulator, channel: str) -> bool:
    posted = emulator.posted(channel)
    parents = [m for m in posted if "thread_ts" not in m]
    if len(parents) != 1 or "Done" not in str(parents[0]["blocks"]):
        return False
    thread = [m["text"] for m in posted if m.get("thread_ts") == parents[0]["ts"]]
    return len(thread) == len(EXPECTED_THREAD) and all(
        text.startswith(prefix) for text, prefix in zip(thread, EXPECTED_THREAD, strict=True)
    )


async def wait_until(predicate: Callable[[], object], limit_s: float, what: str) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if predicate():
            return time.perf_counter() - started
        await asyncio.sleep(0.05)
    raise RuntimeError(f"timed out after {limit_s:.0f}s waiting for {what}")


async def start_serve(
    emulator: SlackEmulator,
    url: str,
    port: int,
    extra: dict[str, str],
    *,
    stderr: int | None = asyncio.subprocess.DEVNULL,
) -> asyncio.subprocess.Process:
    """`debatebot serve` as its own process: HTTP on `port`, the fake provider, the store at
    `url`, Slack at the emulator; `extra` settings on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(
        {
            "DEBATEBOT_SLACK_BOT_TOKEN": TOKEN,
            "DEBATEBOT_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "DEBATEBOT_SLACK_API_URL": emulator.api_url,
            "DEBATEBOT_DATABASE_URL": url,
            "DEBATEBOT_PROVIDER": "fake",
            "DEBATEBOT_HTTP_HOST": "127.0.0.1",
            "DEBATEBOT_HTTP_PORT": str(port),
            "DEBATEBOT_LOG_LEVEL": "ERROR",
            **extra,
        }
    )
    return await asyncio.create_subprocess_exec(
        Path(sys.executable).with_name("debatebot"),
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=stderr,
    )


async def run(debates: int, outage_s: float, delay_s: float, fault_kind: str) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    workdir = Path(tempfile.mkdtemp(prefix="debatebot-outage-"))
    url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    upgrade(url)
    port = free_port()
    process = await start_serve(
        emulator,
        url,
        port,
        {"DEBATEBOT_FAKE_DELAY_S": str(delay_s), "DEBATEBOT_WORKER_CONCURRENCY": str(debates)},
    )
    channels = [f"CBENCH{n:02d}" for n in range(debates)]
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            for n, channel in enumerate(channels):
                # One person each: a person may have only a few debates in flight.
                await driver.command("Should we adopt ADR-042?", channel=channel, user=f"U{n:04d}")
            await wait_until(
                lambda: all(emulator.posted(c) for c in channels), 120, "the parent messages"
            )
            fault = (
                Fault(status=500, error="internal_error")
                if fault_kind == "http500"
                else Fault(error=fault_kind)
            )
            emulator.fail_for("*", fault, seconds=outage_s)
            outage_began = time.perf_counter()
            await asyncio.sleep(outage_s)
            failed = sum(1 for call in emulator.calls if call.status in (400, 500))
            recovery = await wait_until(
                lambda: all(delivered(emulator, c) for c in channels), 600, "every owed message"
            )
            total = time.perf_counter() - outage_began
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        await emulator.stop()
    messages = sum(len(emulator.posted(c)) for c in channels)
    updates = len(emulator.calls_of("chat.update"))
    what = "HTTP 500" if fault_kind == "http500" else f"{fault_kind}"
    goal = BACKOFF_CAP_S if fault_kind == "http500" else TOKEN_GOAL_S
    print(f"{debates} debates in {debates} channels, a {outage_s:.0f}s outage ({what} on every")
    print(f"Slack method), fake model {delay_s}s per call, Slack pacing 1 message/s per channel")
    print(f"  calls refused during the outage        {failed}")
    print(f"  messages delivered (posts + updates)   {messages} + {updates}")
    print(f"  outage start to everything delivered   {total:.1f}s")
    print(f"  outage end to everything delivered     goal <= {goal:.0f}s, measured {recovery:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--debates", type=int, default=20)
    parser.add_argument("--outage", type=float, default=60.0, help="seconds")
    parser.add_argument("--delay", type=float, default=0.5, help="fake model seconds per call")
    parser.add_argument(
        "--fault",
        default="http500",
        choices=["http500", "token_revoked", "invalid_auth"],
        help="how Slack fails during the outage",
    )
    args = parser.parse_args()
    asyncio.run(run(args.debates, args.outage, args.delay, args.fault))


if __name__ == "__main__":
    main()
