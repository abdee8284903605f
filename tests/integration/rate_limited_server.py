"""The loopback model server (`llm_server.py`) behind a vendor's rate limits, with a hosted
model's latency: for the adaptive limiter's tests and `benchmarks/capacity.py`.

Limits are token buckets, as both vendors describe theirs: `requests` and `tokens` per
`window_s` (a minute at a vendor; shorter here, to keep tests fast), refilled continuously, each
request charged when it is admitted. A request takes the tokens its answer reports (the fixed
usage of `llm_server.py`: what the adapters count as spent is what was charged). A request that
does not fit is answered 429 with `retry-after` (the time until it would fit, or `retry_after_s`
when given; in seconds with a fraction, since the time here is scaled, where the vendors send
whole seconds) and is not charged.
Every answer carries the buckets as the vendor's own headers show them:
- OpenAI (`/v1/chat/completions`): `x-ratelimit-limit-*`, `-remaining-*` and `-reset-*` for
  `requests` and `tokens`, the reset as a duration ("1.2s", "340ms", "6m0s"): the time until
  the bucket is full again;
- Anthropic (`/v1/messages`): `anthropic-ratelimit-requests-*` and `-tokens-*` (`-limit`,
  `-remaining`, `-reset`), the reset as the RFC 3339 time the bucket is full again.
Admitted requests are answered after a log-normal latency (`LogNormal`: a median and a 95th
percentile, seeded). Every exchange is recorded (wall time of arrival, API, status, and the key
it came with, which only labels it: the limits are the server's, whatever the key) for
`/stats`.

Run alone (the capacity benchmark does):

    python -m tests.integration.rate_limited_server --requests 60 --window 3 \\
        --median 0.2 --p95 1.0            # prints its URL, serves until killed
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from tests.integration.llm_server import ANTHROPIC_USAGE, OPENAI_USAGE, ModelServer
from tests.integration.sse import REPLY_HEADERS

Z95 = 1.6448536269514722
"""The standard normal's 95th percentile."""
TOKENS = {
    "openai": OPENAI_USAGE["prompt_tokens"] + OPENAI_USAGE["completion_tokens"],
    "anthropic": ANTHROPIC_USAGE["input_tokens"]
    + ANTHROPIC_USAGE["write"]
    + ANTHROPIC_USAGE["output_tokens"],
}
"""The tokens a request takes: what its answer reports as read (cache reads aside) and written."""


@dataclass
class LogNormal:
    """Latencies with the given median and 95th percentile, in seconds, from a seeded stream."""

    median_s: float
    p95_s: float
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def sigma(self) -> float:
        if self.median_s <= 0 or self.p95_s <= self.median_s:
            return 0.0
        return math.log(self.p95_s / self.median_s) / Z95

    @property
    def mean_s(self) -> float:
        return self.median_s * math.exp(self.sigma**2 / 2)

    def __call__(self) -> float:
        return self.median_s * math.exp(self.sigma * self._rng.gauss(0.0, 1.0))


@dataclass
class Bucket:
    """`capacity` per `window_s`, refilled continuously; starts full."""

    capacity: float
    window_s: float
    level: float = field(init=False)
    at: float = field(init=False)

    def __post_init__(self) -> None:
        self.level = self.capacity
        self.at = time.monotonic()

    @property
    def rate(self) -> float:
        return self.capacity / self.window_s

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate * (now - self.at))
        self.at = now

    def wait_s(self, amount: float) -> float:
        """Seconds until `amount` fits (0 when it fits now)."""
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)

    def reset_s(self) -> float:
        """Seconds until it is full again."""
        return (self.capacity - self.level) / self.rate


def go_duration(seconds: float) -> str:
    """A duration as OpenAI writes its resets: "340ms", "1.2s", "6m0s"."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


@dataclass
class Exchange:
    """One request as the vendor saw it: when it arrived (wall time) and what it answered."""

    at: float
    api: str
    status: int
    key: str = ""
    retry_after_s: float | None = None


class RateLimitedServer(ModelServer):
    """`ModelServer` with a vendor's rate limits (`requests`, `tokens` per `window_s`; None: no
    such limit) and a latency per admitted request."""

    def __init__(
        self,
        *,
        requests: float | None,
        tokens: float | None = None,
        window_s: float = 60.0,
        latency: Callable[[], float] = lambda: 0.0,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__()
        self.retry_after_s = retry_after_s
        self.buckets = {
            name: Bucket(capacity, window_s)
            for name, capacity in (("requests", requests), ("tokens", tokens))
            if capacity is not None
        }
        self.latency = latency
        self.exchanges: list[Exchange] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._limited("openai", request, super()._openai)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._limited("anthropic", request, super()._anthropic)

    async def _limited(
        self,
        api: str,
        request: web.Request,
        answer: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        await request.read()  # the whole body now: a client gone during the latency is no error
        wanted = {"requests": 1.0, "tokens": float(TOKENS[api])}
        arrived = time.time()
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        key = request.headers.get("x-api-key") or bearer
        now = time.monotonic()
        for bucket in self.buckets.values():
            bucket.refill(now)
        wait = max(
            (bucket.wait_s(wanted[name]) for name, bucket in self.buckets.items()), default=0.0
        )
        if wait > 0:
            wait = self.retry_after_s if self.retry_after_s is not None else wait
            headers = {**self._headers(api), "retry-after": f"{wait:.3f}"}
            self.exchanges.append(Exchange(arrived, api, 429, key, retry_after_s=wait))
            return self._refusal(api, headers)
        for name, bucket in self.buckets.items():
            bucket.level -= wanted[name]
        headers = self._headers(api)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        request[REPLY_HEADERS] = headers
        try:
            await asyncio.sleep(self.latency())
            response = await answer(request)
        finally:
            self.in_flight -= 1
        if not response.prepared:
            response.headers.update(headers)
        self.exchanges.append(Exchange(arrived, api, response.status, key))
        return response

    def _headers(self, api: str) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, bucket in self.buckets.items():
            limit, remaining = str(int(bucket.capacity)), str(max(0, math.floor(bucket.level)))
            if api == "openai":
                headers[f"x-ratelimit-limit-{name}"] = limit
                headers[f"x-ratelimit-remaining-{name}"] = remaining
                headers[f"x-ratelimit-reset-{name}"] = go_duration(bucket.reset_s())
            else:
                full = datetime.now(UTC) + timedelta(seconds=bucket.reset_s())
                prefix = f"anthropic-ratelimit-{name}"
                headers[f"{prefix}-limit"] = limit
                headers[f"{prefix}-remaining"] = remaining
                headers[f"{prefix}-reset"] = full.isoformat(timespec="milliseconds")
        return headers

    @staticmethod
    def _refusal(api: str, headers: dict[str, str]) -> web.Response:
        message = "Rate limit reached for requests"
        if api == "anthropic":
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": "rate_limit_error", "message": message},
            }
        else:
            payload = {
                "error": {
                    "message": message,
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        return web.json_response(payload, status=429, headers=headers)

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "exchanges": [[e.at, e.status, e.key] for e in self.exchanges],
                "peak_in_flight": self.peak_in_flight,
            }
        )


async def _serve_forever(args: Any) -> None:
    server = RateLimitedServer(
        requests=args.requests,
        tokens=args.tokens,
        window_s=args.window,
        latency=LogNormal(args.median, args.p95, seed=args.seed),
    )
    sys.stdout.write(await server.start() + "\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="the rate-limited loopback model server")
    parser.add_argument("--requests", type=float, help="requests per window (none: no limit)")
    parser.add_argument("--tokens", type=float, help="tokens per window (none: no limit)")
    parser.add_argument("--window", type=float, default=60.0, help="the limits' window (s)")
    parser.add_argument("--median", type=float, default=0.0, help="median latency (s)")
    parser.add_argument("--p95", type=float, default=0.0, help="95th percentile latency (s)")
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(_serve_forever(parser.parse_args()))
