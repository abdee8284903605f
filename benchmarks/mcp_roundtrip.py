"""Round trip of the MCP tool `start_debate` as a coding agent meets it: the official SDK's
client calls it `--calls` times (default 50) and the p50/p95 of each call's wall time are
printed, over stdio (a `debatebot mcp` subprocess; `--no-run` leaves the debates queued, the
default also runs each one in the server's process meanwhile) and over Streamable HTTP (`/mcp`
on the bot's HTTP front door with a bearer token, in a child process). Fake provider, a
migrated SQLite file of its own per transport.

    .venv/bin/python -m benchmarks.mcp_roundtrip [--calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "benchmark-token-0123456789abcdef"


def environment(folder: Path, name: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        DEBATEBOT_DATABASE_URL=f"sqlite:///{folder / f'{name}.sqlite3'}",
        DEBATEBOT_PROVIDER="fake",
        DEBATEBOT_MCP_TOKEN=TOKEN,
        # One client starts every debate here, none in a channel: the intake's in-flight limits
        # (per person, and per channel, which counts every channel-less debate together) would
        # refuse the calls past them while the first debates are queued.
        DEBATEBOT_MAX_DEBATES_PER_USER="1000",
        DEBATEBOT_MAX_DEBATES_PER_CHANNEL="1000",
    )
    subprocess.run(
        [sys.executable, "-m", "bot.cli", "db", "upgrade"], env=env, check=True, capture_output=True
    )
    return env


async def timed_calls(client: Client, calls: int) -> list[float]:
    times = []
    await client.call_tool("list_protocols", {})  # the first call lists the tools
    for number in range(calls):
        started = time.perf_counter()
        result = await client.call_tool("start_debate", {"question": f"Adopt ADR-{number}?"})
        times.append(time.perf_counter() - started)
        assert not result.is_error, result.content
    return times


async def over_stdio(folder: Path, calls: int, *, run: bool) -> list[float]:
    env = environment(folder, f"stdio-{run}")
    args = ["-m", "bot.cli", "mcp", *([] if run else ["--no-run"])]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))
    async with Client(params) as client:
        return await timed_calls(client, calls)


async def over_http(folder: Path, calls: int) -> list[float]:
    env = environment(folder, "http")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.mcp_roundtrip",
        "--serve-http",
        str(port),
        env=env,
        cwd=ROOT,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            for _ in range(200):
                try:
                    await http.get(f"http://127.0.0.1:{port}/healthz")
                    break
                except httpx2.TransportError:
                    await asyncio.sleep(0.1)
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await timed_calls(client, calls)
    finally:
        child.terminate()
        await asyncio.wait_for(child.wait(), timeout=30)


async def serve_http(port: int) -> None:
    """The child: `/mcp` on the bot's front door (OpsASGI, as serve's ops port mounts it),
    debates left queued, bound to 127.0.0.1 but with the bearer token a remote bind needs."""
    import uvicorn

    from bot.fronts.mcp.http import McpHttp
    from bot.fronts.mcp.paths import AllowedDirs
    from bot.fronts.mcp.reading import Reader
    from bot.fronts.mcp.server import McpFront, build_server
    from bot.settings import Settings
    from bot.slack.server import OpsASGI
    from bot.store.tenancy import PENDING_WORKSPACE
    from bot.wiring import build_services, open_store
    from bot.wiring.surfaces import build_intake

    settings = Settings()
    services = build_services(settings)
    with open_store(settings) as engine:
        front = McpFront(
            intake=build_intake(settings, services, engine, workspace=PENDING_WORKSPACE),
            reader=Reader(engine, key=None),
            allowed=AllowedDirs([]),
            requested_by="mcp:benchmark",
        )
        mcp = McpHttp(build_server(front), tokens=(TOKEN,), host="127.0.0.1", watch=front.watch())

        async def healthy() -> dict[str, object]:
            return {"ok": True}

        server = uvicorn.Server(
            uvicorn.Config(
                OpsASGI(healthy, mcp=mcp), port=port, lifespan="off", log_level="warning"
            )
        )
        async with mcp.running():
            await server.serve()


def line(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return (
        f"{name:<28} p50 {statistics.median(ordered) * 1000:7.1f} ms"
        f"   p95 {p95 * 1000:7.1f} ms   ({len(ordered)} calls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--serve-http", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_http is not None:
        asyncio.run(serve_http(args.serve_http))
        return
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        print(line("stdio, --no-run", asyncio.run(over_stdio(where, args.calls, run=False))))
        print(line("stdio, running debates", asyncio.run(over_stdio(where, args.calls, run=True))))
        print(line("streamable HTTP, bearer", asyncio.run(over_http(where, args.calls))))


if __name__ == "__main__":
    main()
