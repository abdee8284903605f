"""How soon a debate's words show: from a turn's call start to its first visible word in the
live plan, and from `/debate` to the first word and to the verdict, with streaming on and off;
and each protocol's critical path (how many calls stand one after another).

Starts `debatebot serve` (HTTP mode, SQLite) against the Slack emulator with the fake model
writing at a set pace (`--first-token`, 1.5 s; `--tokens-per-s`, 40), runs `--runs` debates of
each protocol at once (each in its own channel, so each has Slack's one write a second to itself),
once with the fake streaming and once answering whole at the same pace ("before": what a turn
showed before streaming, its summary when it ended). Prints per protocol:
- `goal ≤ 2.5, measured M`: the median over the streamed turns of the seconds from the turn's
  call start (its stored end less its latency) to the first Slack write showing its text;
- a table: calls, calls on the critical path (the longest chain of calls each starting after the
  previous ended), and wall ÷ critical path (the calls' span over the summed latencies of that
  chain: what the engine, the store and the pace add);
- `/debate` → first visible word of the first turn and → verdict, p50 over the runs, before and
  after.

    .venv/bin/python -m benchmarks.first_word --runs 10
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from sqlmodel import select

from benchmarks.ack_latency import wait_healthy
from benchmarks.outage_recovery import SIGNING_SECRET, wait_until
from benchmarks.thread_messages import QUESTION, start_protocol_bot
from bot.messages.plan import WRITING, task_id
from bot.store import turns
from bot.store.db import make_engine, session_scope
from bot.store.debate_tables import Debate
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import TurnRecord
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import Call, SlackEmulator

PROTOCOLS = {
    "adversarial": "--protocol adversarial",
    "stances": '--protocol stances --for "adopt it now" --against "wait a quarter"',
    "consensus": "--protocol consensus",
    "structured": "--protocol structured",
    "panel": "--protocol panel",
}
GOAL_S = 2.5


@dataclass
class Debated:
    """One debate as Slack and the store saw it (times on this machine's monotonic clock)."""

    asked_at: float
    calls: list[Call]
    stored: list[TurnRecord]
    offset: float
    """Wall time less monotonic time, to place the stored turns on the emulator's clock."""

    def started(self, turn: TurnRecord) -> float:
        return turn.created_at.timestamp() - turn.latency_s - self.offset

    def ended(self, turn: TurnRecord) -> float:
        return turn.created_at.timestamp() - self.offset

    def shown_at(self, turn: TurnRecord, streaming: bool) -> float | None:
        """When Slack was first sent the turn's words: its text being written (streaming), or
        its summary once complete."""
        ident = task_id(turn.key)
        for call in self.calls:
            for chunk in call.params.get("chunks") or []:
                if chunk.get("id") != ident:
                    continue
                output = str(chunk.get("output", ""))
                if (streaming and WRITING in output) or chunk.get("status") == "complete":
                    return call.at
        return None

    def verdict_at(self) -> float:
        return min(c.at for c in self.calls if str(c.params.get("text", "")).startswith("Verdict"))


def critical_path(stored: list[TurnRecord], debated: Debated) -> tuple[int, float]:
    """The longest chain of calls each starting after the previous ended: its length in
    calls and its summed latency (the longest such sum)."""
    spans = sorted((debated.started(t), debated.ended(t), t.latency_s) for t in stored)
    best: list[tuple[int, float]] = []
    for i, (start, _end, latency) in enumerate(spans):
        before = [best[j] for j in range(i) if spans[j][1] <= start + 0.05]
        count, seconds = max(before, key=lambda b: b[1], default=(0, 0.0))
        best.append((count + 1, seconds + latency))
    return max(best, key=lambda b: b[1], default=(0, 0.0))


async def run_once(
    streaming: bool, runs: int, first_token_s: float, tokens_per_s: float
) -> dict[str, list[Debated]]:
    more = {
        "DEBATEBOT_FAKE_PACE__TOKENS_PER_S": str(tokens_per_s),
        "DEBATEBOT_FAKE_PACE__FIRST_TOKEN_S": str(first_token_s),
        "DEBATEBOT_FAKE_PACE__STREAMS": "true" if streaming else "false",
        "DEBATEBOT_WORKER_CONCURRENCY": str(runs * len(PROTOCOLS)),
        "DEBATEBOT_MAX_DEBATES_PER_USER": str(runs * len(PROTOCOLS)),
    }
    emulator, process, port, url = await start_protocol_bot(
        0.0, streaming=True, prefix="debatebot-first-word-", more=more
    )
    channels = {
        (protocol, n): f"CWORD{p}X{n}" for p, protocol in enumerate(PROTOCOLS) for n in range(runs)
    }
    asked: dict[str, float] = {}
    offset = time.time() - time.monotonic()
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(session, base)
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            for (protocol, _n), channel in channels.items():
                asked[channel] = time.monotonic()
                await driver.command(f"{QUESTION} {PROTOCOLS[protocol]}", channel=channel)
            await wait_until(
                lambda: all(done(emulator, c) for c in channels.values()),
                900,
                "every debate's verdict and stopped plan",
            )
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        await emulator.stop()
    engine = make_engine(url)
    found: dict[str, list[Debated]] = {p: [] for p in PROTOCOLS}
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        for (protocol, _n), channel in channels.items():
            debate = session.exec(select(Debate).where(Debate.channel_id == channel)).one()
            assert debate.id is not None
            stored = [
                t
                for t in turns.stored_turns(session, debate_id=debate.id)
                if t.role.value != "triage"
            ]
            calls = [
                c
                for c in emulator.calls
                if c.status == 200
                and (c.params.get("channel") or c.params.get("channel_id")) == channel
            ]
            found[protocol].append(Debated(asked[channel], calls, stored, offset))
    engine.dispose()
    return found


def done(emulator: SlackEmulator, channel: str) -> bool:
    posted = emulator.posted(channel)
    streams = emulator.streams(channel)
    verdict = any(m["text"].startswith("Verdict") for m in posted)
    return verdict and bool(streams) and not streams[0]["streaming"]


def first_words(debated: list[Debated], streaming: bool) -> list[float]:
    return [
        shown - d.started(turn)
        for d in debated
        for turn in d.stored
        if (shown := d.shown_at(turn, streaming)) is not None
    ]


def first_of_debate(d: Debated, streaming: bool) -> float:
    first = min(d.stored, key=d.started)
    shown = d.shown_at(first, streaming)
    return (shown if shown is not None else float("nan")) - d.asked_at


def report(before: dict[str, list[Debated]], after: dict[str, list[Debated]], args: Any) -> None:
    print(
        f"fake model: first token {args.first_token} s, {args.tokens_per_s:g} tokens/s;"
        f" {args.runs} debates per protocol at once; Slack pacing 1 write/s per channel"
    )
    print("seconds from a turn's call start to its first visible word in the live plan:")
    for protocol, debated in after.items():
        measured = statistics.median(first_words(debated, streaming=True))
        print(f"  {protocol:<12} goal \u2264 {GOAL_S}, measured {measured:.2f}")
    print()
    print(f"{'protocol':<12} {'calls':>6} {'critical':>9} {'wall/critical':>14}   (after)")
    for protocol, debated in after.items():
        calls = statistics.median(len(d.stored) for d in debated)
        paths = [critical_path(d.stored, d) for d in debated]
        critical = statistics.median(p[0] for p in paths)
        ratios = [
            (max(d.ended(t) for t in d.stored) - min(d.started(t) for t in d.stored)) / p[1]
            for d, p in zip(debated, paths, strict=True)
        ]
        print(f"{protocol:<12} {calls:>6.0f} {critical:>9.0f} {statistics.median(ratios):>14.2f}")
    print()
    print(
        f"{'protocol':<12} {'first word p50 s':>17} {'':>7} {'verdict p50 s':>14} {'':>7}"
        f"\n{'':<12} {'before':>8} {'after':>8} {'':>7} {'before':>7} {'after':>7}"
    )
    for protocol in after:
        word = [
            statistics.median(first_of_debate(d, s) for d in runs)
            for s, runs in ((False, before[protocol]), (True, after[protocol]))
        ]
        verdict = [
            statistics.median(d.verdict_at() - d.asked_at for d in runs)
            for runs in (before[protocol], after[protocol])
        ]
        print(
            f"{protocol:<12} {word[0]:>8.2f} {word[1]:>8.2f} {'':>7}"
            f" {verdict[0]:>7.2f} {verdict[1]:>7.2f}"
        )


async def run(args: Any) -> None:
    before = await run_once(False, args.runs, args.first_token, args.tokens_per_s)
    after = await run_once(True, args.runs, args.first_token, args.tokens_per_s)
    report(before, after, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first-token", type=float, default=1.5)
    parser.add_argument("--tokens-per-s", type=float, default=40.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
