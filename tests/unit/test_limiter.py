"""The adaptive limiter (`engine/providers/limiter.py`) on a virtual clock: an event loop whose
time jumps to the next timer instead of sleeping, so minutes of vendor traffic run in
milliseconds and every run of a seed is the same run."""

from __future__ import annotations

import asyncio
import math
import random
import selectors
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from engine.errors import LLMError
from engine.providers.limiter import (
    DECREASE,
    AdaptiveLimiter,
    Budget,
    Feedback,
    ModelLimits,
    Outcome,
    Queued,
    slot_for,
)
from engine.providers.retry import RetryPolicy, with_retries

T = TypeVar("T")


class _Jumping(selectors.SelectSelector):
    """A selector that, where the loop would sleep until its next timer, moves the clock there."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("every task waits and no timer is set: a call would wait forever")
        self._loop.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_Jumping(self))

    def time(self) -> float:
        return self.now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


def now() -> float:
    return asyncio.get_running_loop().time()


# --- the basics --------------------------------------------------------------------------


def test_calls_beyond_the_limit_wait_per_model_in_arrival_order() -> None:
    """Calls that report nothing keep the limit where it started: two at a time per model, the
    models independent, each model's queue first come first served."""
    limits = ModelLimits(provider="test", start=2, ceiling=8)
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}
    order: list[str] = []

    async def call(model: str, n: int) -> None:
        async with slot_for(limits, model):
            in_flight[model] = in_flight.get(model, 0) + 1
            peak[model] = max(peak.get(model, 0), in_flight[model])
            order.append(f"{model}-{n}")
            await asyncio.sleep(0.01)
            in_flight[model] -= 1

    async def main() -> None:
        await asyncio.gather(*(call(model, n) for n in range(6) for model in ("a", "b")))

    run_virtual(main())
    assert peak == {"a": 2, "b": 2}
    assert [c for c in order if c.startswith("a")] == [f"a-{n}" for n in range(6)]


def answered(remaining: float = 1_000, limit: float = 1_000, reset_s: float = 1.0) -> Feedback:
    return Feedback(
        Outcome.ANSWERED, (Budget("requests", remaining, limit, reset_s=reset_s, spent=1),)
    )


def test_the_limit_grows_while_every_slot_is_busy_and_the_vendor_has_room() -> None:
    limiter = AdaptiveLimiter(name="test", start=2, ceiling=12)
    peak = 0

    async def call() -> None:
        nonlocal peak
        async with limiter.call() as slot:
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(1.0)
            slot.report(answered())

    async def main() -> None:
        await asyncio.gather(*(call() for _ in range(60)))

    run_virtual(main())
    assert limiter.size == 12, "grown to the ceiling, as demand was there"
    assert peak == 12, "never above it"


def test_a_limit_nobody_fills_does_not_grow() -> None:
    limiter = AdaptiveLimiter(name="test", start=4, ceiling=64)

    async def main() -> None:
        for _ in range(50):
            async with limiter.call() as slot:
                await asyncio.sleep(0.1)
                slot.report(answered())

    run_virtual(main())
    assert limiter.size == 4


def test_a_429_shrinks_the_limit_once_and_holds_every_call_for_its_retry_after() -> None:
    limiter = AdaptiveLimiter(name="test", start=10, ceiling=10)
    started: list[float] = []

    async def refused() -> None:
        async with limiter.call() as slot:
            await asyncio.sleep(0.5)
            slot.report(Feedback(Outcome.LIMITED, retry_after_s=3.0))

    async def other() -> None:
        await asyncio.sleep(0.6)
        async with limiter.call() as slot:
            started.append(now())
            slot.report(answered())

    async def main() -> None:
        await asyncio.gather(*(refused() for _ in range(4)), *(other() for _ in range(3)))

    run_virtual(main())
    assert limiter.size == int(10 * DECREASE), "four 429s of one window are one signal"
    assert len(started) == 3
    assert min(started) >= 3.5, "nobody asks before the retry-after has passed"


def test_a_budget_running_low_shrinks_the_limit_before_any_429() -> None:
    limiter = AdaptiveLimiter(name="test", start=10, ceiling=10)

    async def main() -> None:
        async with limiter.call() as slot:
            slot.report(answered(remaining=3, limit=60, reset_s=57))

    run_virtual(main())
    assert limiter.size == int(10 * DECREASE)


def test_an_empty_budget_paces_calls_as_it_refills() -> None:
    """60 requests a minute and one left: after it, calls start as the budget refills, about
    one a second, keeping one in reserve for the vendor's rounding; not all at once, and not
    when the whole minute has passed. None is refused."""
    limiter = AdaptiveLimiter(name="test", start=4, ceiling=4)
    vendor = Vendor(limit=60, window_s=60)
    vendor.level = 1
    started: list[float] = []

    async def main() -> None:
        for _ in range(4):
            async with limiter.call() as slot:
                started.append(now())
                assert vendor.admit() is None
                slot.report(Feedback(Outcome.ANSWERED, (vendor.budget(spent=1),)))

    run_virtual(main())
    assert started == pytest.approx([0.0, 2.0, 3.0, 4.0], rel=0.02)


def test_an_overload_shrinks_the_limit_and_other_failures_say_nothing() -> None:
    limiter = AdaptiveLimiter(name="test", start=10, ceiling=10)

    async def main() -> None:
        async with limiter.call() as slot:
            slot.report(Feedback(Outcome.OTHER))
        async with limiter.call():
            pass  # a lost connection, a cancelled call: nothing reported
        assert limiter.size == 10
        async with limiter.call() as slot:
            slot.report(Feedback(Outcome.OVERLOADED))

    run_virtual(main())
    assert limiter.size == 7


def test_a_cancelled_call_gives_its_place_back() -> None:
    limiter = AdaptiveLimiter(name="test", start=1, ceiling=1)

    async def hold(seconds: float) -> None:
        async with limiter.call():
            await asyncio.sleep(seconds)

    async def main() -> None:
        first = asyncio.create_task(hold(10))
        queued = asyncio.create_task(hold(1))
        await asyncio.sleep(1)
        assert limiter.waiting == 1
        queued.cancel()
        first.cancel()
        await asyncio.gather(first, queued, return_exceptions=True)
        assert (limiter.in_flight, limiter.waiting) == (0, 0)
        async with limiter.call():
            assert now() == pytest.approx(1.0), "the slot is free at once"

    run_virtual(main())


def test_time_queued_for_a_slot_is_not_spent_from_the_retry_budget() -> None:
    """A call that queued 100 s behind others and was then answered 429 is retried: its 10 s
    retry budget is for the provider's failures, not for the queue."""
    limits = ModelLimits(provider="test", start=1, ceiling=1)
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.1, total_budget_s=10)
    attempts: list[float] = []

    async def busy() -> None:
        async with slot_for(limits, "m"):
            await asyncio.sleep(100)

    async def call() -> str:
        queued = Queued()

        async def attempt() -> str:
            async with slot_for(limits, "m", queued) as slot:
                attempts.append(now())
                if len(attempts) == 1:
                    slot.report(Feedback(Outcome.LIMITED, retry_after_s=1.0))
                    raise LLMError("HTTP 429", retryable=True, retry_after_s=1.0)
                slot.report(answered())
                return "answer"

        return await with_retries(attempt, policy=policy, what="m", clock=queued.clock)

    async def main() -> str:
        first = asyncio.create_task(busy())
        await asyncio.sleep(0)
        answer = await call()
        await first
        return answer

    assert run_virtual(main()) == "answer"
    assert attempts[0] == pytest.approx(100.0)
    assert attempts[1] >= 101.0


# --- a vendor, and processes sharing its key ----------------------------------------------


@dataclass
class Vendor:
    """A token bucket per minute-scale window, as the vendors describe theirs: `limit` requests
    per `window_s`, refilled continuously, charged when a request is admitted. Answers carry the
    bucket as it was after the charge, with the time until it is full again; a refusal is a 429
    whose `retry-after` is the time until one request fits. `schedule` changes the limit at
    given times."""

    limit: float
    window_s: float
    schedule: list[tuple[float, float]] = field(default_factory=list)
    level: float = field(init=False)
    at: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.level = self.limit

    @property
    def rate(self) -> float:
        return self.limit / self.window_s

    def _refill(self, t: float) -> None:
        while self.schedule and self.schedule[0][0] <= t:
            when, limit = self.schedule.pop(0)
            self._fill_to(when)
            self.limit = limit
            self.level = min(self.level, limit)
        self._fill_to(t)

    def _fill_to(self, t: float) -> None:
        self.level = min(self.limit, self.level + self.rate * (t - self.at))
        self.at = t

    def admit(self) -> Feedback | None:
        """None when admitted (charged); the 429 otherwise."""
        self._refill(now())
        if self.level >= 1 - 1e-9:  # a vendor counts whole requests; this one counts floats
            self.level -= 1
            return None
        wait = (1 - self.level) / self.rate
        return Feedback(Outcome.LIMITED, (self.budget(spent=1),), retry_after_s=wait)

    def budget(self, spent: float) -> Budget:
        """The headers: what is left in whole requests, and when the bucket is full again."""
        reset = (self.limit - self.level) / self.rate
        left = math.floor(self.level + 1e-9)
        return Budget("requests", left, self.limit, reset_s=reset, spent=spent)


@dataclass
class Scenario:
    """`processes` limiters (one per worker process) sharing one vendor key, each running
    `debates` debates of `calls` calls in a row, with log-normal latencies."""

    seed: int
    processes: int
    debates: int
    calls: int
    limit: float
    window_s: float
    median_s: float
    sigma: float
    start: int
    ceiling: int
    schedule: list[tuple[float, float]]

    @classmethod
    def random(cls, seed: int) -> Scenario:
        rng = random.Random(seed)
        limit = float(rng.choice([20, 60, 120, 300]))
        window = rng.choice([10.0, 60.0])
        changes = sorted(
            (rng.uniform(10, 200), limit * rng.choice([0.5, 2.0])) for _ in range(rng.randint(0, 2))
        )
        start = rng.randint(1, 16)
        return cls(
            seed=seed,
            processes=rng.randint(1, 3),
            debates=rng.randint(4, 24),
            calls=rng.randint(3, 8),
            limit=limit,
            window_s=window,
            median_s=rng.uniform(0.5, 6.0),
            sigma=rng.uniform(0.2, 1.1),
            start=start,
            ceiling=rng.randint(start, 64),
            schedule=changes,
        )


@dataclass
class Run:
    answered: int = 0
    limited: int = 0
    waited_while_free: list[str] = field(default_factory=list)
    peak: int = 0
    busy_s: float = 0.0
    by_process: list[int] = field(default_factory=list)


async def simulate(scenario: Scenario) -> Run:
    rng = random.Random(scenario.seed)
    vendor = Vendor(scenario.limit, scenario.window_s, list(scenario.schedule))
    limiters = [
        AdaptiveLimiter(name=f"worker {n}", start=scenario.start, ceiling=scenario.ceiling)
        for n in range(scenario.processes)
    ]
    run = Run(by_process=[0] * scenario.processes)
    done = asyncio.Event()

    def check(where: str) -> None:
        # Nobody waits while a slot is free, unless a retry-after or a refilling budget holds.
        t = now()
        for limiter in limiters:
            run.peak = max(run.peak, limiter.in_flight)
            if limiter.waiting and limiter.in_flight < limiter.size and limiter.held_until <= t:
                run.waited_while_free.append(f"{limiter.name} at {t:.3f} ({where})")

    def latency() -> float:
        return math.exp(math.log(scenario.median_s) + scenario.sigma * rng.gauss(0, 1))

    async def attempt(n: int, limiter: AdaptiveLimiter) -> float | None:
        async with limiter.call() as slot:
            check("started")
            refusal = vendor.admit()
            if refusal is not None:
                await asyncio.sleep(0.01)
                slot.report(refusal)
                run.limited += 1
                return refusal.retry_after_s
            budget = vendor.budget(spent=1)
            await asyncio.sleep(latency())
            slot.report(Feedback(Outcome.ANSWERED, (budget,)))
            run.answered += 1
            run.by_process[n] += 1
        check("finished")
        return None

    async def debate(n: int, limiter: AdaptiveLimiter) -> None:
        calls = 0
        while calls < scenario.calls:
            wait = await attempt(n, limiter)
            if wait is None:
                calls += 1
            else:
                # The adapters' retry loop: the server's retry-after plus a little jitter.
                await asyncio.sleep(wait + rng.uniform(0, 0.25))

    async def watch() -> None:
        while not done.is_set():
            check("watch")
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await asyncio.gather(
        *(debate(n, lim) for n, lim in enumerate(limiters) for _ in range(scenario.debates))
    )
    done.set()
    await watcher
    run.busy_s = now()
    return run


@pytest.mark.parametrize("seed", range(16))
def test_random_latencies_and_limits_lose_no_call_and_meet_the_limit_in_a_queue(
    seed: int,
) -> None:
    scenario = Scenario.random(seed)
    run = run_virtual(simulate(scenario))
    total = scenario.processes * scenario.debates * scenario.calls
    assert run.answered == total, "every call answered in the end"
    assert not run.waited_while_free, run.waited_while_free[:5]
    assert run.peak <= scenario.ceiling
    attempts = run.answered + run.limited
    # Beyond the first calls, sent before any answer could tell them anything, at most 2 % (a
    # sweep of 300 seeds: 0.4 % at worst).
    assert run.limited <= 0.02 * attempts + scenario.processes * scenario.start, (
        f"{run.limited} of {attempts} answered 429 ({scenario})"
    )


def test_three_processes_sharing_a_key_converge_on_its_limit_without_a_coordinator() -> None:
    """The issue's case: 60 requests a minute, debates of five calls answered after a
    log-normal delay (median 4 s, p95 20 s), each process running 16 debates at a time for long
    enough to queue far beyond the limit. One process alone, then three on the same key."""
    for processes in (1, 3):
        scenario = Scenario(
            seed=processes,
            processes=processes,
            debates=16,
            calls=5 * 40 // processes,
            limit=60,
            window_s=60,
            median_s=4.0,
            sigma=math.log(5) / 1.645,
            start=8,
            ceiling=256,
            schedule=[],
        )
        run = run_virtual(simulate(scenario))
        allowed = scenario.limit + run.busy_s * scenario.limit / scenario.window_s
        attempts = run.answered + run.limited
        assert run.answered >= 0.9 * allowed, f"{run.answered} of {allowed:.0f} the vendor allowed"
        assert run.limited <= 0.01 * attempts, f"{run.limited} of {attempts} answered 429"
        shares = [n / run.answered for n in run.by_process]
        assert min(shares) >= 0.6 / processes, f"shares {shares}: one process starved"
