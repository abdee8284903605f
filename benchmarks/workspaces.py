"""Many workspaces on one PostgreSQL: throughput, time to the first round, and fairness under a
flood (issue 37).

Starts `--serves` `debatebot serve` processes (OAuth installs, HTTP) and `--workers` `debatebot
worker` processes on a fresh PostgreSQL database, against the Slack emulator on 127.0.0.1 with
`--workspaces` installed workspaces (each its own bot token and channel), the fake provider at
`--delay` seconds a call. Then:

1. steady load: every workspace sends `--debates` `/debate` commands at once, spread over the
   serve replicas; measured: debates per hour (all of them to their verdict in the thread),
   and the time from each command to its first round's message in its thread (p50, p99);
2. a flood: the first workspace sends `--flood` commands at once and, once they are all queued,
   the last sends one; measured: the lone debate's time to its first round, against the steady
   p50, and how many of the flood's debates were still queued then.

Meanwhile it samples PostgreSQL's connections to the database (peak), and at the end each
process's peak RSS (VmHWM).

    .venv/bin/python -m benchmarks.workspaces --database-url postgresql+psycopg://…/postgres
    .venv/bin/python -m benchmarks.workspaces --workspaces 3 --debates 1 --flood 6 --delay 0.2 \\
        --serves 1 --workers 1   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import aiohttp
from slack_sdk.oauth.installation_store import Installation
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.ack_latency import free_port, wait_healthy
from bot.slackweb.installations import DatabaseInstallationStore
from bot.store.cipher import TokenCipher
from bot.store.db import make_engine, upgrade
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import SlackEmulator
from tests.e2e.slack_workspaces import CLIENT_ID, CLIENT_SECRET, Workspaces

SIGNING_SECRET = "benchmark0signing0secret0value01"
KEY = "b3e1c0d9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def in_thread(emulator: SlackEmulator, channel: str, question: str, prefix: str) -> bool:
    """Whether the thread of `question`'s parent in `channel` holds a message starting with
    `prefix` (`Round 1`, `Verdict`)."""
    messages = emulator.messages.get(channel, [])
    parents = [m["ts"] for m in messages if "thread_ts" not in m and question in str(m)]
    return any(
        m.get("thread_ts") in parents and str(m.get("text", "")).startswith(prefix)
        for m in messages
    )


async def start(kind: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        Path(sys.executable).with_name("debatebot"),
        *([kind] if kind == "serve" else [kind, "--name", f"bench-{uuid.uuid4().hex[:6]}"]),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def install_all(url: str, emulator: SlackEmulator, teams: list[str]) -> None:
    """Each workspace installed as the OAuth flow leaves it: its bot and token stored."""
    tenancy = Workspaces(redirect_url="https://bench.invalid/slack/oauth_redirect")
    engine = make_engine(url)
    store = DatabaseInstallationStore(engine=engine, cipher=TokenCipher(KEY.encode()))
    for team in teams:
        token = f"xoxb-{team}-bench"
        tenancy.add(team, channels={f"C{team}"}, token=token, bot_user_id="UBOT", bot_id="BBOT")
        await store.async_save(
            Installation(
                app_id="A1",
                team_id=team,
                bot_token=token,
                bot_id="BBOT",
                bot_user_id="UBOT",
                bot_scopes="commands,chat:write",
                user_id="UINSTALLER",
                installed_at=time.time(),
            )
        )
    engine.dispose()
    emulator.tenancy = tenancy


async def run(args: argparse.Namespace) -> None:
    base = make_url(args.database_url)
    name = f"debatebot_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    emulator = SlackEmulator()
    await emulator.start()
    teams = [f"T{n:03d}" for n in range(args.workspaces)]
    await install_all(url, emulator, teams)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(
        {
            "DEBATEBOT_SLACK_CLIENT_ID": CLIENT_ID,
            "DEBATEBOT_SLACK_CLIENT_SECRET": CLIENT_SECRET,
            "DEBATEBOT_TOKEN_ENCRYPTION_KEY": KEY,
            "DEBATEBOT_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "DEBATEBOT_SLACK_API_URL": emulator.api_url,
            "DEBATEBOT_DATABASE_URL": url,
            "DEBATEBOT_PROVIDER": "fake",
            "DEBATEBOT_FAKE_DELAY_S": str(args.delay),
            "DEBATEBOT_POST_INTERVAL_S": "0",
            "DEBATEBOT_HTTP_HOST": "127.0.0.1",
            "DEBATEBOT_LOG_LEVEL": "ERROR",
            "DEBATEBOT_MAX_DEBATES_PER_CHANNEL": str(args.flood + args.debates + 1),
            "DEBATEBOT_MAX_DEBATES_PER_USER": str(args.flood + args.debates + 1),
        }
    )
    ports = [free_port() for _ in range(args.serves)]
    processes = [
        await start("serve", {**env, "DEBATEBOT_HTTP_PORT": str(port)}) for port in ports
    ] + [await start("worker", env) for _ in range(args.workers)]
    peak_connections = 0
    sampling = True

    async def sample() -> None:
        nonlocal peak_connections
        while sampling:
            with admin.connect() as connection:
                count = connection.execute(
                    text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name"),
                    {"name": name},
                ).scalar_one()
            peak_connections = max(peak_connections, int(count))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    rng = random.Random(7)
    try:
        async with aiohttp.ClientSession() as session:
            drivers = []
            for port in ports:
                await wait_healthy(session, f"http://127.0.0.1:{port}", limit_s=60)
                drivers.append(
                    SlackDriver(
                        f"http://127.0.0.1:{port}",
                        SIGNING_SECRET,
                        f"{emulator.url}/response",
                        session,
                    )
                )

            async def send(team: str, question: str) -> float:
                """Send `/debate question` from `team` to a random replica; when it was sent."""
                driver = rng.choice(drivers)
                body = driver.command_body(question, user=f"U{team}", channel=f"C{team}")
                fields = {key: values[0] for key, values in parse_qs(body).items()}
                fields["team_id"] = team
                started = time.perf_counter()
                form = "application/x-www-form-urlencoded"
                reply = await driver.send(urlencode(fields), form)
                if reply.status != 200:
                    raise RuntimeError(f"/debate answered {reply.status}: {reply.body}")
                return started

            async def ask(team: str, question: str, *, to_verdict: bool = False) -> float:
                """Seconds from the command to the first round in its thread; with
                `to_verdict`, also waits for the verdict."""
                started = await send(team, question)
                channel = f"C{team}"
                while not in_thread(emulator, channel, question, "Round 1"):
                    await asyncio.sleep(0.05)
                    if time.perf_counter() - started > args.limit:
                        raise RuntimeError(f"{question} in {team}: no first round")
                first = time.perf_counter() - started
                while to_verdict and not in_thread(emulator, channel, question, "Verdict"):
                    await asyncio.sleep(0.1)
                    if time.perf_counter() - started > args.limit:
                        raise RuntimeError(f"{question} in {team}: no verdict")
                return first

            began = time.perf_counter()
            steady = await asyncio.gather(
                *(
                    ask(team, f"Should {team} adopt ADR-{n}?", to_verdict=True)
                    for team in teams
                    for n in range(args.debates)
                )
            )
            steady_s = time.perf_counter() - began
            flooder, lone = teams[0], teams[-1]
            # Every flood command is acknowledged (queued) before the lone one is sent; the
            # flood's own debates are not waited for: with the workspace's in-flight limit they
            # take far longer than the measurement, which is the lone debate's first round.
            await asyncio.gather(
                *(send(flooder, f"Flood {n} of {flooder}?") for n in range(args.flood))
            )
            lone_s = await ask(lone, f"Lone question of {lone}?")
            counter = create_engine(url)
            with counter.connect() as connection:
                waiting = connection.execute(
                    text("SELECT count(*) FROM debate WHERE team_id = :team AND state = 'queued'"),
                    {"team": flooder},
                ).scalar_one()
            counter.dispose()
            rss = [peak_rss_mb(p.pid) for p in processes]
    finally:
        sampling = False
        await sampler
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            await process.wait()
        await emulator.stop()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    total = len(steady)
    print(
        f"{args.workspaces} workspaces, {args.serves} serve + {args.workers} worker processes on"
        f" PostgreSQL, fake model {args.delay}s a call"
    )
    print(f"  steady: {total} debates to their verdicts in {steady_s:.1f}s")
    print(f"    debates per hour                     {total / steady_s * 3600:.0f}")
    p50, p99 = statistics.median(steady), percentile(steady, 0.99)
    print(f"    /debate -> first round  p50 {p50:.1f}s  p99 {p99:.1f}s")
    print(f"  flood: {args.flood} from {flooder}, then one from {lone}")
    print(f"    the lone debate's first round         {lone_s:.1f}s")
    print(f"    the flood's debates still queued then {waiting}")
    print(f"  peak PostgreSQL connections            {peak_connections}")
    serves = ", ".join(f"{mb:.0f}" for mb in rss[: args.serves])
    workers = ", ".join(f"{mb:.0f}" for mb in rss[args.serves :])
    print(f"  peak RSS (MB): serve {serves}; worker {workers}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DEBATEBOT_TEST_POSTGRES_URL"),
        help="a PostgreSQL server's URL (a database is made there for the run and dropped)",
    )
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--debates", type=int, default=2, help="per workspace, steady load")
    parser.add_argument("--flood", type=int, default=200, help="one workspace's burst")
    parser.add_argument("--serves", type=int, default=3)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--delay", type=float, default=2.0, help="fake model seconds per call")
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds a debate may take")
    args = parser.parse_args()
    if not args.database_url:
        parser.error("--database-url (or DEBATEBOT_TEST_POSTGRES_URL) is required")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
