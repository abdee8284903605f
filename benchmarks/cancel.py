"""Stopping a debate (issue 44): the time from a cancel to the debate's end, the dollars it
spends after the cancel, and whether any model call starts after it. Goal: p95 ≤ 2 s, nothing
started after the press.

The model is the fake provider with 3 s calls (`--delay`), priced through DEBATEBOT_PRICES so
spend is not zero. Each of `--cancels` debates (20) is claimed and run by one worker as
`debatebot run` runs one; at a seeded random moment inside one of its first calls (never at a
call's edge) the cancel is asked through bot.store.cancels, as every door asks, and the worker
notices it by its poll (`cancel_poll_s`, 0.5 s). Measured: the seconds from the request to the
debate's stored ending; the cost stored after the request (what a stopped call would have cost
is not stored: it was abandoned); the calls started after the request.

    .venv/bin/python -m benchmarks.cancel [--cancels 20] [--delay 3] [--seed 44]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from bot.settings import Settings
from bot.store import cancels as cancel_requests
from bot.store import queue, turns
from bot.store.db import in_session, make_engine, session_scope, upgrade
from bot.store.debate_tables import CancelSource, DebateSource, DebateState
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import build_services, build_worker
from engine.llm import LLM, Completion, LLMRequest
from engine.models import DebateStatus, ModelSettings
from engine.pricing import Pricing

GOAL_P95_S = 2.0
PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}


class Timed:
    """The configured fake model, noting when each call starts in `starts`."""

    def __init__(self, inner: LLM, starts: list[float], started: asyncio.Event) -> None:
        self.inner = inner
        self.starts = starts
        self.started = started

    @property
    def provider(self) -> str:
        return self.inner.provider

    def price_of(self, model: str) -> Pricing:
        return self.inner.price_of(model)

    async def complete(self, request: LLMRequest) -> Completion:
        self.starts.append(time.monotonic())
        self.started.set()
        return await self.inner.complete(request)


def _cost(engine: Engine, debate_id: int) -> float:
    """What the debate's stored turns cost (the debate's own total is written at its end)."""
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        return sum(row.cost_usd for row in turns.turn_rows(session, debate_id=debate_id))


def _asks(debate_id: int) -> Callable[[Session], cancel_requests.CancelAsked]:
    """The cancel request, as every door asks it."""
    return lambda session: cancel_requests.request_cancel(
        session, debate_id=debate_id, by="bench", source=CancelSource.CLI
    )


async def measure(cancels: int, delay_s: float, seed: int) -> dict[str, float]:
    starts: list[float] = []
    started = asyncio.Event()
    os.environ["DEBATEBOT_PRICES"] = json.dumps({"fake:fake-model": PRICE})
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'cancel.sqlite3'}"
        upgrade(url)
        settings = Settings(
            database_url=url,
            provider="fake",
            fake_delay_s=delay_s,
            review_sample_rate=0.0,
        )
        plain = build_services(settings)

        def timed(model: ModelSettings) -> LLM:
            return Timed(plain.resolve_llm(model), starts, started)

        services = build_services(settings, resolve_llm=timed)
        engine = make_engine(url)
        worker = build_worker(services, engine, worker_id="bench-cancel")
        waits: list[float] = []
        spent_after: list[float] = []
        started_after = 0
        outcomes: list[str] = []
        for index in range(cancels):
            spec = services.policy.spec(f"Benchmark {index}: should we adopt plan {index}?")
            with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
                debate, _ = queue.enqueue_debate(
                    session,
                    new=queue.NewDebate(
                        trigger_key=f"bench-cancel:{index}", spec=spec, source=DebateSource.CLI
                    ),
                )
                debate_id = debate.id
            assert debate_id is not None
            claimed = await worker.claim_with_run(debate_id)
            assert claimed is not None
            running, stored = claimed
            starts.clear()
            run = asyncio.create_task(worker.execute(running, stored=stored))
            # Inside call 1 or 2, at least 0.3 s from either of its ends.
            call = rng.randint(0, 1)
            while len(starts) < call + 1:
                started.clear()
                await started.wait()
            await asyncio.sleep(rng.uniform(0.3, delay_s - 0.3))
            cost_before = _cost(engine, debate_id)
            pressed = time.monotonic()
            await in_session(engine, _asks(debate_id), workspace=PENDING_WORKSPACE)
            await run
            ended = time.monotonic()
            with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
                final = queue.get_debate(session, debate_id=debate_id)
                assert final.state == DebateState.FINISHED
                outcomes.append(final.outcome.value if final.outcome else "?")
            cost_after = _cost(engine, debate_id)
            waits.append(ended - pressed)
            spent_after.append(cost_after - cost_before)
            started_after += sum(1 for start in starts if start > pressed)
        engine.dispose()
        await plain.aclose()
        await services.aclose()
    ordered = sorted(waits)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "cancels": cancels,
        "delay_s": delay_s,
        "cancelled": outcomes.count(DebateStatus.CANCELLED.value),
        "p50_s": round(statistics.median(waits), 3),
        "p95_s": round(p95, 3),
        "max_s": round(ordered[-1], 3),
        "usd_after_press_total": round(sum(spent_after), 6),
        "usd_after_press_max": round(max(spent_after), 6),
        "calls_started_after_press": started_after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=20)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=44)
    args = parser.parse_args()
    found = asyncio.run(measure(args.cancels, args.delay, args.seed))
    print(json.dumps(found, indent=2))
    ok = found["p95_s"] <= GOAL_P95_S and found["calls_started_after_press"] == 0
    print(
        f"goal: p95 <= {GOAL_P95_S:g} s and no call started after the press;"
        f" measured: p50 {found['p50_s']} s, p95 {found['p95_s']} s,"
        f" ${found['usd_after_press_total']} stored after the presses,"
        f" {found['calls_started_after_press']} call(s) started after them"
        f" -> {'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
