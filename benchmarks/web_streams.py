"""CPU of `debatebot web` with many open event streams on one debate.

Starts `debatebot web --no-worker` as its own process (SQLite, fake provider), asks one debate
over the API (queued; nobody runs it yet), and reads the process's CPU time (/proc) over
`--seconds` with no stream open, then with `--streams` streams following that debate. Then a
`debatebot worker --exit-when-idle` runs the debate, and every stream must receive all its
turns and the end. The goal: fifty followers of one debate cost about what one does, because
one reader of the store serves them all.

    .venv/bin/python -m benchmarks.web_streams --streams 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

DEVNULL = asyncio.subprocess.DEVNULL

GOAL_CPU_SHARE = 0.05
"""At most 5 % of one core for fifty open streams on a debate that is not moving."""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def follow(url: str, http: aiohttp.ClientSession, seen: list[int]) -> None:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as stream:
        async for raw in stream.content:
            if raw.startswith(b"event: turn"):
                seen[0] += 1
            elif raw.startswith(b"event: end"):
                seen[1] += 1
                return


async def measure(pid: int, seconds: float) -> float:
    start, began = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - start) / (time.monotonic() - began)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        env = {
            **os.environ,
            "DEBATEBOT_PROVIDER": "fake",
            "DEBATEBOT_DATABASE_URL": f"sqlite:///{Path(folder) / 'web.sqlite3'}",
            "DEBATEBOT_LOG_LEVEL": "WARNING",
        }
        command = [sys.executable, "-m", "bot.cli"]
        web = await asyncio.create_subprocess_exec(
            *command, "web", "--no-worker", "--port", str(port), env=env, stderr=DEVNULL
        )
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(200):
                    try:
                        async with http.post(
                            f"{base}/api/debates", json={"question": "Fifty readers?"}
                        ) as answer:
                            debate_id = (await answer.json())["id"]
                            break
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.1)
                idle = await measure(web.pid, args.seconds)
                seen = [[0, 0] for _ in range(args.streams)]
                url = f"{base}/api/debates/{debate_id}/events"
                followers = [asyncio.create_task(follow(url, http, s)) for s in seen]
                await asyncio.sleep(1.0)
                following = await measure(web.pid, args.seconds)
                one = [[0, 0]]
                worker = await asyncio.create_subprocess_exec(
                    *command, "worker", "--exit-when-idle", env=env, stderr=DEVNULL
                )
                began = time.monotonic()
                await asyncio.wait_for(asyncio.gather(*followers), 120)
                delivered = time.monotonic() - began
                await asyncio.wait_for(worker.wait(), 60)
                await follow(url, http, one[0])
        finally:
            web.terminate()
            await asyncio.wait_for(web.wait(), 30)
    turns = one[0][0]
    complete = sum(1 for s in seen if s == [turns, 1])
    print(f"debatebot web, one debate, CPU share of one core over {args.seconds:.0f} s")
    print(f"  no stream open            {idle * 100:5.2f} %")
    print(f"  {args.streams} streams following   {following * 100:5.2f} %")
    met = following < GOAL_CPU_SHARE
    print(f"  goal: under {GOAL_CPU_SHARE * 100:.0f} % -> {'met' if met else 'MISSED'}")
    print(
        f"then run by a worker: {complete} of {args.streams} streams got all {turns} turns and"
        f" the end, {delivered:.1f} s after the worker started (its start-up included)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
