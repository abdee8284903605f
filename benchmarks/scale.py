"""Many debates at once: N queued debates run by one `debatebot worker --concurrency N`, divided
by one debate run the same way, in one run of this script. Goal: ≤ 1.2.

Each measurement runs in its own process (so its peak RSS is its own): a fresh database gets the
debates queued, then the worker command runs in-process until the queue is empty; the time is
that command's wall time, start-up included for both N and 1. The model is the fake provider
with a fixed latency per call (`--delay`, 0.2 s by default), so the ratio shows what the bot
itself costs when many debates wait on their models at once. Each is measured `--repeats`
times (3), one run of 1 then one of N, and the ratio is of the medians: a single pair of runs
on a shared 2-core machine moved the ratio by ±0.05. A third run of N serves
`--metrics-port` and is scraped four times a second (sixty times Prometheus' default rate), for
the scrape times under load; the ratio is taken from the two runs nobody scrapes.

    .venv/bin/python -m benchmarks.scale [--debates 200] [--delay 0.2] [--repeats 3]
        [--backend sqlite|postgresql|both]

PostgreSQL needs DEBATEBOT_TEST_POSTGRES_URL (scripts/postgres prints one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.2


def child(url: str, debates: int, scrape: bool) -> None:
    """Queue `debates` debates in the migrated database at `url`, then time the worker command
    on them; prints a JSON line."""
    from bot.cli import main
    from bot.settings import Settings
    from bot.store import queue
    from bot.store.db import make_engine, session_scope
    from bot.store.debate_tables import DebateSource, DebateState
    from bot.store.tenancy import PENDING_WORKSPACE
    from bot.wiring import build_services

    settings = Settings()
    services = build_services(settings)
    engine = make_engine(url)
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        for index in range(debates):
            spec = services.policy.spec(
                f"Benchmark question {index}: should we adopt plan {index}?"
            )
            queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"bench:{uuid.uuid4()}", spec=spec, source=DebateSource.CLI
                ),
            )
    command = ["worker", "--concurrency", str(debates), "--exit-when-idle", "--name", "bench"]
    scraper = None
    if scrape:
        port = free_port()
        command += ["--metrics-port", str(port)]
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
        scraper.start()
    started = time.perf_counter()
    code = main(command)
    elapsed = time.perf_counter() - started
    if scraper is not None:
        scraper.stop.set()
        scraper.join()
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        finished = queue.count_debates(session, state=DebateState.FINISHED)
    engine.dispose()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scrapes = (scraper.timings if scraper is not None else []) or [float("nan")]
    print(
        json.dumps(
            {
                "elapsed": elapsed,
                "finished": finished,
                "code": code,
                "rss": peak_mib,
                "scrape_ms": statistics.median(scrapes) * 1000,
                "scrape_max_ms": max(scrapes) * 1000,
                "scrape_bytes": scraper.size if scraper is not None else 0,
            }
        )
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Scraper(threading.Thread):
    """Scrapes the worker's /metrics four times a second while it runs, timing each scrape."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.timings: list[float] = []
        self.size = 0

    def run(self) -> None:
        while not self.stop.wait(0.25):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    body = response.read()
            except OSError:
                continue
            self.timings.append(time.perf_counter() - started)
            self.size = len(body)


def fresh_database(backend: str, workdir: Path) -> str:
    from benchmarks.store_bench import fresh_postgres
    from bot.store.db import upgrade

    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'scale-{uuid.uuid4().hex[:6]}.sqlite3'}"
    else:
        base = os.environ.get("DEBATEBOT_TEST_POSTGRES_URL")
        if not base:
            raise SystemExit("set DEBATEBOT_TEST_POSTGRES_URL (scripts/postgres prints one)")
        url = fresh_postgres(base)
    upgrade(url)
    return url


def measure(
    backend: str, debates: int, delay: float, workdir: Path, *, scrape: bool = False
) -> dict[str, float]:
    """The child's report (seconds, peak RSS in MiB, /metrics scrapes when `scrape`) of one
    worker run over `debates` queued debates."""
    url = fresh_database(backend, workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(
        DEBATEBOT_DATABASE_URL=url,
        DEBATEBOT_PROVIDER="fake",
        DEBATEBOT_FAKE_DELAY_S=str(delay),
        DEBATEBOT_LOG_LEVEL="WARNING",
    )
    command = [sys.executable, "-m", "benchmarks.scale", "--child", url, "--debates", str(debates)]
    process = subprocess.Popen(
        command + (["--scrape"] if scrape else []),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"the {backend} run failed:\n{err[-3000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    if report["finished"] != debates:
        raise SystemExit(f"only {report['finished']} of {debates} debates finished:\n{err[-3000:]}")
    return {key: float(value) for key, value in report.items()}


def median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median wall time (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda run: run["elapsed"])
    return ordered[(len(ordered) - 1) // 2]


def seconds(runs: list[dict[str, float]]) -> str:
    return ", ".join(f"{run['elapsed']:.2f}" for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--debates", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--scrape", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.debates, args.scrape)
        return
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as folder:
        for backend in backends:
            ones, manys = [], []
            for _ in range(args.repeats):
                ones.append(measure(backend, 1, args.delay, Path(folder)))
                manys.append(measure(backend, args.debates, args.delay, Path(folder)))
            one = median_run(ones)
            many = median_run(manys)
            watched = measure(backend, args.debates, args.delay, Path(folder), scrape=True)
            print(
                f"{backend:<10} 1 debate {one['elapsed']:6.2f} s (peak RSS {one['rss']:.0f} MiB);"
                f" {args.debates} debates {many['elapsed']:6.2f} s"
                f" (peak RSS {many['rss']:.0f} MiB); medians of"
                f" {seconds(ones)} and {seconds(manys)}"
            )
            print(
                f"{backend:<10} /metrics scraped 4×/s during another {args.debates}"
                f" ({watched['elapsed']:.2f} s): median {watched['scrape_ms']:.1f} ms,"
                f" max {watched['scrape_max_ms']:.1f} ms, {watched['scrape_bytes']:,.0f} bytes"
            )
            print(
                f"{backend:<10} {args.debates} debates ÷ 1 debate: goal ≤ {GOAL},"
                f" measured {many['elapsed'] / one['elapsed']:.2f}"
            )


if __name__ == "__main__":
    main()
