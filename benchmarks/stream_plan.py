"""What the live plan costs a channel: Slack writes per debate, stream appends included, and how
soon a finished turn shows as complete in the plan.

Starts `debatebot serve` as its own process (HTTP mode, the schema-filling fake model with a
per-call delay, Slack's pacing of one write a second per channel, the default stream and status
intervals) against the Slack emulator on 127.0.0.1, runs one `/debate` per protocol, each in its
own channel, and prints per protocol: the channel's writes for the debate (posts, updates, stream
starts, appends and stops, statuses) with the stream's share, the writes per second while the
debate ran (goal: Slack's one a second), the shortest gap between two writes (goal: the pace,
1 s), and the delay from a turn ending (its stored `created_at`) to the write that shows its task
complete (goal: one stream interval plus one paced write, 2 s), median and worst. With
`--mode fallback` the emulator has no streaming and the parent's status carries the progress, as
in a workspace without it; `both` runs the two one after the other.

    .venv/bin/python -m benchmarks.stream_plan --delay 1.5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import sys
import time
from typing import Any

import aiohttp
from sqlmodel import select

from benchmarks.ack_latency import wait_healthy
from benchmarks.outage_recovery import SIGNING_SECRET, wait_until
from benchmarks.thread_messages import OPTIONS, QUESTION, start_protocol_bot
from bot.messages.plan import task_id
from bot.store import turns
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate
from bot.store.tenancy import EVERY_WORKSPACE
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import STREAM_METHODS, Call, SlackEmulator

WRITES = frozenset(
    {"chat.postMessage", "chat.update", "chat.delete", "assistant.threads.setStatus"}
    | STREAM_METHODS
)
WRITES_GOAL_PER_S = 1.0
GAP_GOAL_S = 1.0
DELAY_GOAL_S = 2.0


def finished(emulator: SlackEmulator, channel: str, streaming: bool) -> bool:
    posted = emulator.posted(channel)
    done = any(m["text"].startswith("Verdict") for m in posted) and any(
        "thread_ts" not in m and "*Done*" in str(m["blocks"]) for m in posted
    )
    streams = emulator.streams(channel)
    return done and (not streaming or (bool(streams) and not streams[0]["streaming"]))


def completed_at(calls: list[Call]) -> dict[str, float]:
    """When Slack was first sent each task as complete: task id -> the call's time."""
    found: dict[str, float] = {}
    for call in calls:
        for chunk in call.params.get("chunks") or []:
            if chunk.get("type") == "task_update" and chunk.get("status") == "complete":
                found.setdefault(chunk["id"], call.at)
    return found


async def run_once(delay_s: float, streaming: bool) -> list[tuple[str, dict[str, Any]]]:
    emulator, process, port, url = await start_protocol_bot(
        delay_s, streaming=streaming, prefix="debatebot-stream-"
    )
    channels = {protocol: f"CPLAN{n}" for n, protocol in enumerate(OPTIONS)}
    # The emulator's call times are this machine's monotonic clock; turns store wall time.
    wall_minus_monotonic = time.time() - time.monotonic()
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            for protocol, channel in channels.items():
                await driver.command(f"{QUESTION} {OPTIONS[protocol]}", channel=channel)
            try:
                await wait_until(
                    lambda: all(finished(emulator, c, streaming) for c in channels.values()),
                    300,
                    "every debate's verdict, final status and stopped plan",
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

    engine = make_engine(url)
    rows: list[tuple[str, dict[str, Any]]] = []
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        for protocol, channel in channels.items():
            debate = session.exec(select(Debate).where(Debate.channel_id == channel)).one()
            assert debate.id is not None
            stored = turns.stored_turns(session, debate_id=debate.id)
            calls = [
                c
                for c in emulator.calls
                if c.method in WRITES
                and c.status == 200
                and (c.params.get("channel") or c.params.get("channel_id")) == channel
            ]
            span = max(c.at for c in calls) - min(c.at for c in calls)
            if os.environ.get("BENCH_TRACE"):
                trace(protocol, calls, stored, wall_minus_monotonic)
            gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
            complete = completed_at([c for c in calls if c.method in STREAM_METHODS])
            delays = [
                complete[task_id(turn.key)] + wall_minus_monotonic - turn.created_at.timestamp()
                for turn in stored
                if task_id(turn.key) in complete
            ]
            rows.append(
                (
                    protocol,
                    {
                        "writes": len(calls),
                        "stream": sum(1 for c in calls if c.method in STREAM_METHODS),
                        "rate": (len(calls) - 1) / span if span else 0.0,
                        "gap": min(gaps) if gaps else float("nan"),
                        "turns": len(stored),
                        "delays": delays,
                    },
                )
            )
    engine.dispose()
    return rows


def trace(protocol: str, calls: list[Call], stored: list[Any], offset: float) -> None:
    """Every write and every turn's end, in time order (BENCH_TRACE=1)."""
    start = min(c.at for c in calls)
    events = [
        (
            c.at - start,
            f"{c.method} {str(c.params.get('text') or '')[:40]}"
            + " ".join(
                f"{k.get('id', '')[:12]}:{k.get('status', '')}"
                for k in c.params.get("chunks") or []
            ),
        )
        for c in calls
    ]
    events += [
        (t.created_at.timestamp() - offset - start, f"  turn {t.role.value} {t.speaker} ends")
        for t in stored
    ]
    print(f"--- {protocol}")
    for at, what in sorted(events):
        print(f"  {at:6.2f} {what}")


def report(delay_s: float, streaming: bool, rows: list[tuple[str, dict[str, Any]]]) -> None:
    mode = "live plan streamed" if streaming else "no streaming: the parent's status (fallback)"
    print(f"\n{mode}; one debate per protocol, fake model {delay_s}s a call, 1 write/s a channel")
    print(
        f"{'protocol':<12} {'turns':>5} {'writes':>6} {'stream':>6}"
        f" {'writes/s':>8} (goal <= {WRITES_GOAL_PER_S:.0f})"
        f" {'min gap s':>9} (goal >= {GAP_GOAL_S:.0f})"
        f" {'turn -> complete s, median / worst':>35} (goal <= {DELAY_GOAL_S:.0f})"
    )
    for protocol, row in rows:
        delays = row["delays"]
        shown = (
            f"{statistics.median(delays):.2f} / {max(delays):.2f} ({len(delays)} tasks)"
            if delays
            else "-"
        )
        print(
            f"{protocol:<12} {row['turns']:>5} {row['writes']:>6} {row['stream']:>6}"
            f" {row['rate']:>8.2f} {'':10} {row['gap']:>9.2f} {'':10} {shown:>35}"
        )


async def run(delay_s: float, mode: str) -> None:
    for streaming in {"stream": [True], "fallback": [False], "both": [True, False]}[mode]:
        report(delay_s, streaming, await run_once(delay_s, streaming))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=1.5, help="fake model seconds per call")
    parser.add_argument("--mode", choices=("stream", "fallback", "both"), default="both")
    args = parser.parse_args()
    asyncio.run(run(args.delay, args.mode))


if __name__ == "__main__":
    main()
