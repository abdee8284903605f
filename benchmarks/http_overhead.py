"""What the bot adds to a debate's model time over HTTP: one adversarial debate through the openai
SDK against a loopback OpenAI-compatible server that answers every call after a fixed delay
(tests/integration/llm_server.py, run as its own process so its work is not counted here).
Goal: debate wall time ÷ the model's latency ≤ 1.05, the latency being the time the server spent
answering the debate's calls (its fixed delay plus its own work, from its /stats); the ratio
to calls × delay alone is printed beside it.

The debate runs as `debatebot run` runs it (the worker's path: store, audit chain, events), in
this process, after the provider is built; the ratio is taken per run and the median printed.

    .venv/bin/python -m benchmarks.http_overhead [--delay 0.2] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.05


async def one_debate(folder: Path) -> tuple[float, int, float]:
    """(wall seconds, model calls, seconds inside the SDK's calls) of one adversarial debate on a
    fresh SQLite store."""
    from bot.settings import Settings
    from bot.store import queue
    from bot.store.db import session_scope, upgrade
    from bot.store.debate_tables import DebateSource
    from bot.store.tenancy import PENDING_WORKSPACE
    from bot.wiring import build_services, build_worker, open_store

    url = f"sqlite:///{folder / f'http-{uuid.uuid4().hex[:6]}.sqlite3'}"
    upgrade(url)
    settings = Settings(database_url=url)
    services = build_services(settings)
    spec = services.policy.spec("Should we move the session store to Redis?", rounds=1)
    services.registry.check({p.role.value: p.model for p in spec.participants})
    with open_store(settings) as engine:
        worker = build_worker(services, engine, worker_id="bench")
        with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
            queued, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"bench:{uuid.uuid4()}", spec=spec, source=DebateSource.CLI
                ),
            )
        assert queued.id is not None
        started = time.perf_counter()
        claimed = await worker.claim_with_run(queued.id)
        assert claimed is not None
        result = await worker.execute(claimed[0], stored=claimed[1])
        elapsed = time.perf_counter() - started
    await services.aclose()
    assert result is not None
    assert result.status.value == "COMPLETE", result.error
    calls = sum(1 + turn.reasks for turn in result.transcript)
    return elapsed, calls, sum(turn.latency_s for turn in result.transcript)


def server_busy(base: str) -> float:
    """Seconds the loopback server has spent answering model calls so far."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with direct.open(f"{base}/stats", timeout=5) as response:
        return float(json.load(response)["busy_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2, help="server latency per call (s)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.llm_server", "--delay", str(args.delay)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        os.environ.update(
            DEBATEBOT_PROVIDER="openai-compatible",
            DEBATEBOT_OPENAI_COMPATIBLE_BASE_URL=f"{base}/v1",
            DEBATEBOT_OPENAI_COMPATIBLE_MODEL="loopback",
        )
        ratios = []
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.runs):
                busy_before = server_busy(base)
                elapsed, calls, in_calls = asyncio.run(one_debate(Path(folder)))
                served = server_busy(base) - busy_before
                ratios.append(elapsed / served)
                print(
                    f"debate {elapsed:.3f} s; the server answered its {calls} calls in"
                    f" {served:.3f} s: ratio {ratios[-1]:.3f} ({elapsed / (calls * args.delay):.3f}"
                    f" to {calls} x {args.delay} s; {in_calls - served:.3f} s in HTTP and the SDK,"
                    f" {elapsed - in_calls:.3f} s in the bot between calls)"
                )
        print(
            f"HTTP debate ÷ its model latencies: goal ≤ {GOAL}, measured"
            f" {statistics.median(ratios):.3f} (median of {args.runs})"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
