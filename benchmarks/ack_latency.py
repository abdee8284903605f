"""Ack latency of `/debate`: how long Slack waits for the bot's HTTP answer.

Starts `debatebot serve` as its own process (HTTP mode, fake provider with a per-call delay so
its in-process workers are busy, a migrated SQLite store, real pacing of one message per second
per channel) against the Slack emulator on 127.0.0.1, then in one run:

1. a warm-up and `--sequential` commands one at a time (the unloaded baseline);
2. `--burst` correctly signed commands sent concurrently over 10 channels.

Reports p50/p99/max of each, the burst p99 as a share of Slack's 3 s budget, and the burst p50
over the sequential p50 (ratios, since the machine is shared and noisy).

    .venv/bin/python -m benchmarks.ack_latency --burst 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bot.store.db import upgrade
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import SlackEmulator

SIGNING_SECRET = "benchmark0signing0secret0value01"
TOKEN = "xoxb-1234-5678-benchmarktoken"
SLACK_BUDGET_S = 3.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def wait_healthy(session: aiohttp.ClientSession, base: str, limit_s: float = 30) -> None:
    """Wait until `debatebot serve` at `base` answers /healthz with 200."""
    for _ in range(int(limit_s * 10)):
        try:
            async with session.get(f"{base}/healthz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"debatebot serve at {base} did not become healthy in {limit_s:.0f}s")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def timed(driver: SlackDriver, text: str, channel: str) -> float:
    started = time.perf_counter()
    reply = await driver.command(text, channel=channel)
    elapsed = time.perf_counter() - started
    if reply.status != 200:
        raise RuntimeError(f"/debate answered {reply.status}: {reply.body}")
    return elapsed


def report(label: str, values: list[float]) -> None:
    print(
        f"{label:<12} n={len(values):<4} p50 {statistics.median(values) * 1000:7.1f} ms"
        f"  p99 {percentile(values, 0.99) * 1000:7.1f} ms  max {max(values) * 1000:7.1f} ms"
    )


async def main(burst: int, sequential: int) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    workdir = Path(tempfile.mkdtemp(prefix="debatebot-ack-"))
    url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    upgrade(url)
    port = free_port()
    env = {
        **os.environ,
        "DEBATEBOT_SLACK_BOT_TOKEN": TOKEN,
        "DEBATEBOT_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "DEBATEBOT_SLACK_API_URL": emulator.api_url,
        "DEBATEBOT_DATABASE_URL": url,
        "DEBATEBOT_PROVIDER": "fake",
        "DEBATEBOT_FAKE_DELAY_S": "0.05",
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
    try:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            await timed(driver, "Warm-up question?", "CWARM")
            alone = [
                await timed(driver, f"Sequential question {n}?", "CSEQ") for n in range(sequential)
            ]
            together = await asyncio.gather(
                *(
                    timed(driver, f"Concurrent question {n}?", f"CBURST{n % 10}")
                    for n in range(burst)
                )
            )
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        await emulator.stop()
    print(f"/debate ack latency, debatebot serve over HTTP on 127.0.0.1, {os.cpu_count()} cores")
    report("sequential", alone)
    report(f"burst x{burst}", list(together))
    print(
        f"burst p99 is {percentile(list(together), 0.99) / SLACK_BUDGET_S:.1%} of Slack's 3 s;"
        f" burst p50 / sequential p50 = "
        f"{statistics.median(together) / statistics.median(alone):.1f}x"
    )
    slow = sum(1 for value in together if value >= SLACK_BUDGET_S)
    print(f"commands answered after 3 s: {slow} of {burst}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--sequential", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.burst, args.sequential))
