"""Debates per hour: `debatebot worker` processes against a loopback model with a hosted model's
latency and a vendor's rate limit, one worker and three sharing one key, on SQLite and
PostgreSQL, with and without the vendor's limit. Goals: with 60 requests a minute, at least
90 % of what the limit allows and at most 1 % of calls answered 429, for one and three workers;
with no limit, one worker at its default concurrency at least 80 % of concurrency ÷ the mean
debate time.

The model is `tests/integration/rate_limited_server.py`, in its own process: it answers the
OpenAI API after a log-normal delay (`--median`, `--p95`) and enforces the vendor's limit as
token buckets of requests and tokens per minute, answering 429 with `retry-after` and sending
OpenAI's `x-ratelimit-*` headers on every answer. Time runs `--scale` times faster than a
vendor's (a minute's limit is enforced per 60/scale seconds, latencies are divided by the scale,
and so are the bot's model timeout and retry waits), so a measurement takes a minute or so; every
figure is given back in unscaled time. Each measurement queues more debates than can finish in a
fresh database, runs the workers (their own processes, the bot's defaults) for `--warmup` then
`--minutes` scaled minutes, stops them, and counts the debates finished in the measured minutes
(those that failed apart) and the server's calls. The ceiling is the vendor's limit divided by
the model calls of a debate (those the server answered in the measured minutes per debate
finished in them: turns, re-asks, judges) or, without a limit, the workers' concurrency divided
by the time a debate's calls take one after another. Each worker sends its
own key, which only labels its calls: the limit is the server's, for all of them. The workers
use the openai provider (`--provider openai-compatible`: the OpenAI-compatible one, which the
server answers the same way).

    .venv/bin/python -m benchmarks.capacity [--backend sqlite|postgresql|both] [--workers 1 3]
        [--limit both|vendor|none] [--rpm 60] [--tpm 1000000] [--median 4] [--p95 20]
        [--scale 20] [--warmup 3] [--minutes 15] [--code DIR]
        [--provider openai|openai-compatible]

`--code DIR` runs the workers on another checkout's code (the database is queued by this one):
`git archive main | tar -x -C /tmp/before` then `--code /tmp/before` measures before a change.
PostgreSQL needs DEBATEBOT_TEST_POSTGRES_URL (scripts/postgres prints one) or `--postgres URL`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_SHARE = 0.90
GOAL_429 = 0.01
GOAL_UNLIMITED = 0.80
CONCURRENCY = 16
"""`DEBATEBOT_WORKER_CONCURRENCY`'s default: debates one worker runs at once."""
QUESTION = "Should we move the session store from Memcached to Redis?"


@dataclass(frozen=True)
class Setup:
    backend: str
    workers: int
    rpm: float | None
    """The vendor's requests per minute; None: no vendor limit."""


@dataclass
class Result:
    setup: Setup
    debates_per_hour: float
    """Debates that did not fail, finished per (unscaled) hour."""
    ceiling: float
    calls_per_debate: float
    """Model calls answered in the measured minutes per debate finished in them."""
    refused: float
    """Share of all calls answered 429."""
    shares: list[float]
    """Each worker's share of the calls answered."""
    failed: int
    """Debates that failed in the measured minutes (a model call out of retries)."""


def start_server(
    args: argparse.Namespace, rpm: float | None, log: Path
) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        "-m",
        "tests.integration.rate_limited_server",
        "--window",
        str(60 / args.scale),
        "--median",
        str(args.median / args.scale),
        "--p95",
        str(args.p95 / args.scale),
        "--seed",
        str(args.seed),
    ]
    if rpm is not None:
        command += ["--requests", str(rpm), "--tokens", str(args.tpm)]
    with log.open("w") as errors:
        server = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True
        )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def provider_settings(provider: str, base_url: str, key: str) -> dict[str, str]:
    """The settings (as environment variables) that point `provider` at the loopback server."""
    if provider == "openai":
        return {
            "DEBATEBOT_PROVIDER": "openai",
            "DEBATEBOT_OPENAI_BASE_URL": base_url,
            "DEBATEBOT_OPENAI_API_KEY": key,
        }
    return {
        "DEBATEBOT_PROVIDER": "openai-compatible",
        "DEBATEBOT_OPENAI_COMPATIBLE_BASE_URL": base_url,
        "DEBATEBOT_OPENAI_COMPATIBLE_MODEL": "loopback",
        "DEBATEBOT_OPENAI_COMPATIBLE_API_KEY": key,
    }


def queue_debates(url: str, count: int, provider: str, base_url: str) -> None:
    """Queue `count` one-round adversarial debates on `provider`."""
    from bot.settings import Settings
    from bot.store import queue
    from bot.store.db import make_engine, session_scope
    from bot.store.debate_tables import DebateSource
    from bot.store.tenancy import PENDING_WORKSPACE
    from bot.wiring import build_services

    named = provider_settings(provider, base_url, "sk-loopback-capacity-queue")
    fields = {name.removeprefix("DEBATEBOT_").lower(): value for name, value in named.items()}
    spec = build_services(Settings.model_validate(fields)).policy.spec(QUESTION, rounds=1)
    engine = make_engine(url)
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        for _ in range(count):
            new = queue.NewDebate(
                trigger_key=f"capacity:{uuid.uuid4()}", spec=spec, source=DebateSource.CLI
            )
            queue.add_debate(session, new=new)
        session.commit()
    engine.dispose()


def worker_env(args: argparse.Namespace, url: str, base_url: str, n: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    scale = args.scale
    env.update(provider_settings(args.provider, base_url, f"sk-loopback-capacity-worker-{n}"))
    env.update(
        PYTHONPATH=str(args.code),
        DEBATEBOT_DATABASE_URL=url,
        DEBATEBOT_LLM_TIMEOUT_S=str(120 / scale),
        DEBATEBOT_LLM_RETRY_BUDGET_S=str(300 / scale),
        DEBATEBOT_LLM_BACKOFF_BASE_S=str(1 / scale),
        DEBATEBOT_LLM_BACKOFF_MAX_S=str(30 / scale),
        DEBATEBOT_SHUTDOWN_GRACE_S="0",
        DEBATEBOT_LOG_LEVEL="WARNING",
    )
    return env


def finished_between(url: str, start: float, end: float) -> tuple[int, int]:
    """Of the debates finished between two wall times: how many did not fail, how many failed."""
    from sqlmodel import select

    from bot.store.db import make_engine, session_scope
    from bot.store.debate_tables import Debate, DebateState
    from bot.store.tenancy import EVERY_WORKSPACE
    from engine.models import DebateStatus

    engine = make_engine(url)
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        rows = session.exec(
            select(Debate.finished_at, Debate.outcome).where(Debate.state == DebateState.FINISHED)
        ).all()
    engine.dispose()
    done = failed = 0
    for finished_at, outcome in rows:
        if finished_at is None:
            continue
        when = finished_at if finished_at.tzinfo else finished_at.replace(tzinfo=UTC)
        if start <= when.timestamp() < end:
            failed += outcome == DebateStatus.FAILED
            done += outcome != DebateStatus.FAILED
    return done, failed


def server_exchanges(base_url: str) -> list[tuple[float, int, str]]:
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with direct.open(f"{base_url.removesuffix('/v1')}/stats", timeout=30) as response:
        return [
            (float(at), int(status), str(key))
            for at, status, key in json.load(response)["exchanges"]
        ]


def fresh_database(backend: str, workdir: Path, args: argparse.Namespace) -> str:
    """A new database migrated by the migrations of the checkout the workers run: an installed
    debatebot (an editable install of another checkout) may carry other ones."""
    from alembic import command

    from benchmarks.store_bench import fresh_postgres
    from bot.store.db import alembic_config

    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'capacity-{uuid.uuid4().hex[:6]}.sqlite3'}"
    else:
        base = args.postgres or os.environ.get("DEBATEBOT_TEST_POSTGRES_URL")
        if not base:
            raise SystemExit("set DEBATEBOT_TEST_POSTGRES_URL or --postgres (scripts/postgres)")
        url = fresh_postgres(base)
    config = alembic_config(url)
    config.set_main_option("script_location", str(args.code / "migrations"))
    command.upgrade(config, "head")
    return url


def measure(setup: Setup, args: argparse.Namespace, workdir: Path) -> Result:
    url = fresh_database(setup.backend, workdir, args)
    server, address = start_server(args, setup.rpm, workdir / "server.log")
    base_url = f"{address}/v1"
    warmup_s = args.warmup * 60 / args.scale
    window_s = args.minutes * 60 / args.scale
    # More than can finish: the workers' full concurrency for the whole run, twice over.
    calls_per_s = setup.workers * CONCURRENCY * args.scale / (args.median * 1.6)
    if setup.rpm is not None:
        calls_per_s = min(calls_per_s, setup.rpm * args.scale / 60 * 1.5)
    count = int(2 * calls_per_s * (warmup_s + window_s) / 5) + setup.workers * CONCURRENCY * 2
    queue_debates(url, count, args.provider, base_url)
    logs = [open(workdir / f"worker-{n}.log", "w") for n in range(setup.workers)]  # noqa: SIM115
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker", "--name", f"capacity-{n}"],
            cwd=args.code,
            env=worker_env(args, url, base_url, n),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for n, log in enumerate(logs)
    ]
    try:
        started = time.time()
        time.sleep(warmup_s)
        measured_from = time.time()
        time.sleep(window_s)
        measured_to = time.time()
        exchanges = server_exchanges(base_url)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
        for log in logs:
            log.close()
        server.terminate()
        server.wait()
    debates, failed = finished_between(url, measured_from, measured_to)
    if debates == 0:
        tail = (workdir / "worker-0.log").read_text()[-3000:]
        raise SystemExit(f"no debate finished in {setup}:\n{tail}")
    run = [e for e in exchanges if started <= e[0] < measured_to]
    refused = sum(status == 429 for _, status, _ in run) / max(1, len(run))
    by_key = Counter(key for _, status, key in run if status == 200)
    total = sum(by_key.values()) or 1
    shares = [by_key[f"sk-loopback-capacity-worker-{n}"] / total for n in range(setup.workers)]
    # Every model call a debate makes (its turns, their re-asks, its independent judges), as the
    # server answered them in the measured minutes, per debate finished in them.
    answered = sum(status == 200 for at, status, _ in run if at >= measured_from)
    calls_per_debate = answered / (debates + failed)
    scaled_hours = window_s * args.scale / 3600
    if setup.rpm is not None:
        ceiling = setup.rpm * 60 / calls_per_debate
    else:
        debate_s = calls_per_debate * mean_latency(args)
        ceiling = setup.workers * CONCURRENCY * 3600 / debate_s
    return Result(
        setup=setup,
        debates_per_hour=debates / scaled_hours,
        ceiling=ceiling,
        calls_per_debate=calls_per_debate,
        refused=refused,
        shares=shares,
        failed=failed,
    )


def mean_latency(args: argparse.Namespace) -> float:
    """The log-normal's mean, unscaled, from its median and 95th percentile."""
    from tests.integration.rate_limited_server import LogNormal

    return LogNormal(args.median, args.p95).mean_s


def verdict(result: Result) -> str:
    share = result.debates_per_hour / result.ceiling
    if result.setup.rpm is not None:
        met = share >= GOAL_SHARE and result.refused <= GOAL_429
        return "met" if met else "NOT met"
    if result.setup.workers == 1:
        return "met" if share >= GOAL_UNLIMITED else "NOT met"
    return "(no goal)"


def describe(code: Path) -> str:
    head = subprocess.run(
        ["git", "-C", str(code), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    return f"{code} ({head[:72] or 'not a git checkout'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--limit", choices=["both", "vendor", "none"], default="both")
    parser.add_argument("--rpm", type=float, default=60.0, help="vendor requests per minute")
    parser.add_argument("--tpm", type=float, default=1_000_000, help="vendor tokens per minute")
    parser.add_argument("--median", type=float, default=4.0, help="median latency, s")
    parser.add_argument("--p95", type=float, default=20.0, help="95th percentile latency, s")
    parser.add_argument("--scale", type=float, default=20.0, help="how much faster time runs")
    parser.add_argument("--warmup", type=float, default=3.0, help="scaled minutes not counted")
    parser.add_argument("--minutes", type=float, default=15.0, help="scaled minutes measured")
    parser.add_argument("--seed", type=int, default=7, help="the latencies' seed")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout the workers run")
    parser.add_argument(
        "--provider",
        choices=["openai", "openai-compatible"],
        default="openai",
        help="the provider the workers use (both speak to the loopback server)",
    )
    parser.add_argument("--postgres", help="PostgreSQL URL (else DEBATEBOT_TEST_POSTGRES_URL)")
    args = parser.parse_args()
    args.code = args.code.resolve()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    limits: list[float | None] = {
        "both": [args.rpm, None],
        "vendor": [args.rpm],
        "none": [None],
    }[args.limit]
    print(f"workers run {describe(args.code)}, provider {args.provider}")
    print(
        f"time runs {args.scale:g}x faster than a vendor's: latency median {args.median:g} s and"
        f" p95 {args.p95:g} s are served in {args.median / args.scale:.3g} s and"
        f" {args.p95 / args.scale:.3g} s, a minute's limit is enforced per"
        f" {60 / args.scale:.3g} s; {args.warmup:g} + {args.minutes:g} scaled minutes a"
        f" measurement ({(args.warmup + args.minutes) * 60 / args.scale:.0f} s); figures below"
        " are in unscaled time"
    )
    print(
        f"goals: with a {args.rpm:g} req/min vendor limit, >= {GOAL_SHARE:.0%} of the ceiling"
        f" (the limit / calls per debate) and <= {GOAL_429:.0%} of calls answered 429, 1 and 3"
        f" workers; with no limit, one worker >= {GOAL_UNLIMITED:.0%} of its concurrency"
        f" ({CONCURRENCY}) / the mean debate time (calls per debate x mean latency"
        f" {mean_latency(args):.2f} s)"
    )
    header = (
        f"{'backend':<10} {'workers':>7} {'vendor limit':>13} {'debates/h':>9} {'ceiling':>8}"
        f" {'share':>6} {'429s':>6} {'calls/debate':>12} {'per worker':>16} {'failed':>6}  goal"
    )
    print(header)
    with tempfile.TemporaryDirectory() as folder:
        for rpm in limits:
            for backend in backends:
                for workers in args.workers:
                    result = measure(Setup(backend, workers, rpm), args, Path(folder))
                    limit = f"{rpm:g} req/min" if rpm is not None else "none"
                    per_worker = " / ".join(f"{share:.0%}" for share in result.shares)
                    print(
                        f"{backend:<10} {workers:>7} {limit:>13}"
                        f" {result.debates_per_hour:>9,.0f} {result.ceiling:>8,.0f}"
                        f" {result.debates_per_hour / result.ceiling:>6.0%}"
                        f" {result.refused:>6.1%} {result.calls_per_debate:>12.2f}"
                        f" {per_worker:>16} {result.failed:>6}  {verdict(result)}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
