"""Store -> page latency of a turn, and the page's first paint, for `debatebot web`.

Runs the web door as `debatebot web` builds it (its own worker pool, SQLite, the fake model
answering each call after `--delay` seconds) and asks `--debates` debates over the HTTP API,
`--parallel` at a time. For each it follows `/api/debates/{id}/events` as the page does and
measures, for every turn, the time from the turn's stored `created_at` to its event reaching
the client. Then headless Chromium (Debian's, as the browser tests use) loads the playground
and one debate's page and reports their first contentful paint.

    .venv/bin/python -m benchmarks.web_latency --debates 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from playwright.async_api import async_playwright

from engine.providers.fake import FunctionLLM
from tests.helpers import DebateScript
from tests.web_door import RunningWeb, running_web

GOAL_P95_MS = 500.0
GOAL_PAINT_MS = 1000.0
PAINTED = """new Promise((done) => {
  new PerformanceObserver((list) => {
    const found = list.getEntriesByName("first-contentful-paint")[0];
    if (found) { done(found.startTime); }
  }).observe({type: "paint", buffered: true});
  setTimeout(() => done(-1), 5000);
})"""
"""The first contentful paint's time (ms since navigation), -1 if none within 5 s."""
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run"]


async def follow(web: RunningWeb, http: aiohttp.ClientSession, question: str) -> list[float]:
    """Ask one debate and follow it: each turn's store -> client latency in ms."""
    async with http.post(f"{web.url}/api/debates", json={"question": question}) as answer:
        debate_id = (await answer.json())["id"]
    latencies: list[float] = []
    async with http.get(f"{web.url}/api/debates/{debate_id}/events") as stream:
        kind = ""
        async for raw in stream.content:
            text = raw.decode().rstrip("\n")
            if text.startswith("event: "):
                kind = text[7:]
            elif text.startswith("data: ") and kind == "turn":
                stored = datetime.fromisoformat(json.loads(text[6:])["created_at"])
                latencies.append((datetime.now(UTC) - stored).total_seconds() * 1000)
            elif text.startswith("data: ") and kind == "end":
                break
    return latencies


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def first_paint(url: str) -> float:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        page = await browser.new_page()
        await page.goto(url, wait_until="load")
        paint = await page.evaluate(PAINTED)
        await browser.close()
    return float(paint)


async def main(args: argparse.Namespace) -> None:
    llm = FunctionLLM(DebateScript(), delay_s=args.delay)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'web.sqlite3'}"
        async with running_web(url, llm, worker_concurrency=args.parallel) as web:
            gate = asyncio.Semaphore(args.parallel)
            async with aiohttp.ClientSession() as http:

                async def one(n: int) -> list[float]:
                    async with gate:
                        return await follow(web, http, f"Benchmark question {n}?")

                runs = await asyncio.gather(*(one(n) for n in range(args.debates)))
            latencies = [ms for run in runs for ms in run]
            home = await first_paint(web.url + "/")
            debate = await first_paint(web.url + "/debates/1")
    p50, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    print(f"store -> page latency of a turn over {args.debates} debates, {len(latencies)} turns")
    print(f"  p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   max {max(latencies):7.1f} ms")
    print(f"  goal: p95 under {GOAL_P95_MS:.0f} ms -> {'met' if p95 < GOAL_P95_MS else 'MISSED'}")
    print("first contentful paint (headless Chromium, loopback)")
    print(f"  playground {home:6.1f} ms   debate page {debate:6.1f} ms")
    worst = max(home, debate)
    print(f"  goal: under {GOAL_PAINT_MS:.0f} ms -> {'met' if worst < GOAL_PAINT_MS else 'MISSED'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--debates", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per model call")
    asyncio.run(main(parser.parse_args()))
