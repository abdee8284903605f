"""How many calls to one model may be in flight, learnt from the vendor's answers.

Each provider and model has one `AdaptiveLimiter` per process. Calls beyond its limit wait in a
first-come queue. The limit is adjusted the way TCP adjusts its congestion window (additive
increase, multiplicative decrease, AIMD), with the vendor's answers as the congestion signal:

- it starts at `start` and, while every slot is in use and the vendor reports headroom, grows
  by one per successful call until the first sign of congestion ("slow start"), and by one per
  window of successful calls after that;
- it shrinks by `DECREASE` on a 429, on an overload (503, 529, a call that did not answer in
  time), and when a budget the vendor reports (requests, tokens) runs low, at most once per
  window of calls, so one burst of bad news counts once;
- it never goes above `ceiling` (the deployment's fixed limit) nor below one call.

The vendor's waits hold every call of the process on that model, not only the one told: a 429's
`retry-after` holds new calls until it has passed, and each budget the answers report is
mirrored (`Mirror`: what is left, how fast it refills), so a call starts only when the vendor
will have room for it. A burst of debates therefore meets the vendor's limit in this queue.

Several processes on one key need no coordinator. Each learns what the others take from how
much less the vendor reports left than its own calls explain; it counts on the rest of the
refill, and of what an answer says is left, only on its share (the others read the same
numbers and would start calls on them at the same moment). Their total therefore converges on
the vendor's rate without a burst of 429s; a budget running low cuts every process's limit by
the same factor, and the limits grow back by equal steps. How the rate is split between them
is not managed further: a process gets what the timing of its calls wins.

Pure asyncio: the providers turn their vendor's headers into `Feedback` and report it on the
`Call` they hold (`engine/providers/openai_chat.py`, `engine/providers/anthropic_messages.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum

log = logging.getLogger("debatebot.providers")

DECREASE = 0.7
"""The factor a congestion signal multiplies the limit by (CUBIC's; Reno halves)."""
LOW_SHARE = 0.1
"""A budget is low when less than this share of its limit is left..."""
LOW_CALLS = 2.0
"""...or fewer than this many calls' worth of it, whichever is more."""
DEFAULT_HOLD_S = 1.0
"""How long a 429 that says neither `retry-after` nor a reset time holds new calls."""
COST_WEIGHT = 0.2
"""The weight of the latest call in the running average of what a call takes from a budget."""
FOREIGN_HORIZON = 0.25
"""How far back the estimate of what other processes take looks, as a share of the time a
budget takes to refill from empty."""
RATE_WEIGHT = 0.2
"""The weight of the latest reading in the running average of a budget's refill rate."""
RATE_SAMPLE_SHARE = 0.1
"""A budget tells its refill rate reliably once at least this share of it is spent."""
OWN_SHARE_FLOOR = 0.1
"""The least share of a budget's refill a process counts on, however much others seem to
take: enough to keep asking, and so to learn when they stop."""
EPSILON = 1e-9


class Outcome(StrEnum):
    """What an attempt said about the vendor's capacity."""

    ANSWERED = "answered"
    LIMITED = "limited"
    """429: over a rate limit."""
    OVERLOADED = "overloaded"
    """503, 529, or no answer in time: the server cannot keep up."""
    OTHER = "other"
    """Any other failure (a refused request, a lost connection): says nothing of capacity."""


@dataclass(frozen=True)
class Budget:
    """One of the vendor's rate limits as an answer reports it: `remaining` of `limit` (in
    requests, tokens...) left, full again in `reset_s` seconds; `spent` is what this call took
    from it (0 when unknown, as on a refusal)."""

    name: str
    remaining: float
    limit: float | None = None
    reset_s: float | None = None
    spent: float = 0.0


@dataclass(frozen=True)
class Feedback:
    """What one attempt's answer said: its outcome, the budgets it reported and the vendor's
    `retry-after`."""

    outcome: Outcome
    budgets: tuple[Budget, ...] = ()
    retry_after_s: float | None = None


@dataclass
class Call:
    """One attempt's place in the limiter: `report` what its answer said before leaving.
    `waited_s` is how long it queued for the place."""

    seq: int
    started_at: float
    waited_s: float = 0.0
    feedback: Feedback | None = None

    def report(self, feedback: Feedback) -> None:
        self.feedback = feedback


@dataclass
class Mirror:
    """This process's part of one vendor budget, in the budget's units.

    Synced from the answer of the latest call started (`synced`): what that answer said was
    left, refilled since at the budget's `rate` less what other processes take (`foreign`,
    learnt from how much less the vendor reports than this process's calls explain), less what
    this process's later calls took (`cost` each), which that answer could not count. Of that,
    the part of this process is its share of the refill: the others read the same budget. It
    then refills at that share and each call started here takes `cost`. Until the rate and the
    cost are known it holds nobody.
    """

    capacity: float = 0.0
    rate: float | None = None
    """Units the vendor gives back per second, as last seen while the budget was not full."""
    foreign: float = 0.0
    """Units other processes on the same key take per second, estimated."""
    cost: float = 0.0
    """What one call takes (a running average); 0 while unknown."""
    level: float = 0.0
    at: float = 0.0
    synced: Call | None = None
    synced_remaining: float = 0.0

    def refill(self) -> float | None:
        """What this process may count on getting back per second: the rest of the rate."""
        if self.rate is None:
            return None
        return max(self.rate * OWN_SHARE_FLOOR, self.rate - max(0.0, self.foreign))

    def level_at(self, now: float) -> float:
        refill = self.refill()
        if refill is None:
            return self.level
        return min(self.capacity, self.level + refill * (now - self.at))

    def wait_s(self, now: float) -> float:
        """Seconds until one more call fits (0 when it fits now, or when it cannot be told)."""
        refill = self.refill()
        if self.synced is None or refill is None or self.cost <= 0:
            return 0.0
        # A reserve of one call, for the vendor's rounding of what it reports. Once the budget
        # is paced the reserve stays in it, so it costs no throughput.
        need = min(2.0 * self.cost, self.capacity)
        short = need - self.level_at(now)
        return short / refill if short > EPSILON * self.cost else 0.0

    def charge(self, now: float) -> None:
        """A call starts: it takes `cost`."""
        self.level = self.level_at(now) - self.cost
        self.at = now

    def learn_cost(self, spent: float) -> None:
        if spent > 0:
            self.cost = spent if self.cost <= 0 else self.cost + COST_WEIGHT * (spent - self.cost)

    def sync(
        self, slot: Call, budget: Budget, charged: Callable[[int, int | None], int], now: float
    ) -> float:
        """Take what the answer to `slot` reported; what is left now. `charged(a, b)` counts
        this process's calls started after call `a` up to call `b` (None: up to the latest)
        that the vendor charged (a 429 is not charged)."""
        later = charged(slot.seq, None)
        if budget.limit is None or budget.reset_s is None:
            self.synced = None
            return budget.remaining - self.cost * later
        self.capacity = max(budget.limit, budget.remaining)
        # OpenAI: `x-ratelimit-reset-*` is "the time until the rate limit ... resets to its
        # initial state"; Anthropic: `...-reset` is "the time when the rate limit will be fully
        # replenished". Either way, what is missing refills in that time.
        # The reset is rounded (to the second, in an RFC 3339 time): measured over a nearly full
        # budget it can be off several times, so only a budget well drained corrects the rate.
        # What is left is counted in whole units, so the one refilling is half back on average;
        # over a small budget that rounding still moves each reading, hence the running average.
        missing = self.capacity - budget.remaining - 0.5
        drained = missing >= RATE_SAMPLE_SHARE * self.capacity
        if budget.reset_s > 0 and missing > 0 and (drained or self.rate is None):
            sample = missing / budget.reset_s
            self.rate = (
                sample if self.rate is None else self.rate + RATE_WEIGHT * (sample - self.rate)
            )
        previous = self.synced
        if previous is not None and self.rate is not None:
            # Had nobody else called, the vendor would have reported what it said before,
            # refilled, less this process's calls started since: the rest went elsewhere.
            elapsed = slot.started_at - previous.started_at
            alone = self.synced_remaining + self.rate * elapsed
            if elapsed > 0 and alone < self.capacity:
                own = charged(previous.seq, slot.seq) * self.cost
                sample = (alone - own - budget.remaining) / elapsed
                # A running average over time, not over answers: answers close together
                # weigh little. Its horizon is a quarter of the time the budget takes to
                # refill from empty.
                horizon = FOREIGN_HORIZON * self.capacity / self.rate
                weight = 1.0 - math.exp(-elapsed / horizon)
                self.foreign += weight * (sample - self.foreign)
        self.synced = slot
        self.synced_remaining = budget.remaining
        # Since that answer was counted, the budget refilled and the others kept taking: at the
        # rate they took it lately, a burst from a full budget included.
        since = budget.remaining + (self.rate or 0.0) * (now - slot.started_at)
        since -= max(0.0, self.foreign) * (now - slot.started_at)
        left = min(self.capacity, since) - self.cost * later
        # The others read the same answers and may start calls on what is left as soon as this
        # process does: it counts on its share of it, as of the refill.
        share = (self.refill() or 0.0) / self.rate if self.rate else 1.0
        self.level = share * left if left > 0 else left
        self.at = now
        return left


@dataclass
class AdaptiveLimiter:
    """The calls in flight to one model of one provider (`name` says which, in logs)."""

    name: str
    start: int
    ceiling: int
    limit: float = field(init=False)
    in_flight: int = field(init=False, default=0)
    _hold: float = field(init=False, default=0.0)
    """Loop time before which no call starts: a `retry-after`."""
    _threshold: float = field(init=False)
    _waiters: deque[asyncio.Future[Call]] = field(init=False, default_factory=deque)
    _timer: asyncio.TimerHandle | None = field(init=False, default=None)
    _next_seq: int = field(init=False, default=0)
    _epoch_seq: int = field(init=False, default=0)
    """Calls started before this one belong to the window the last decrease already answered."""
    _mirrors: dict[str, Mirror] = field(init=False, default_factory=dict)
    _refused: set[int] = field(init=False, default_factory=set)
    """Calls answered 429 the mirrors may still count: the vendor charged them nothing."""

    def __post_init__(self) -> None:
        if self.ceiling < 1 or self.start < 1:
            raise ValueError(f"{self.name}: a limit lets at least one call through")
        self.limit = float(min(self.start, self.ceiling))
        self._threshold = float(self.ceiling)

    @property
    def size(self) -> int:
        """How many calls may be in flight now."""
        return max(1, int(self.limit))

    @property
    def held_until(self) -> float:
        """Loop time before which no call starts: a `retry-after`, or a budget refilling."""
        now = asyncio.get_running_loop().time()
        return max(self._hold, now + self._budget_wait(now))

    @property
    def waiting(self) -> int:
        """Calls queued for a slot."""
        return sum(1 for waiter in self._waiters if not waiter.done())

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[Call]:
        """Wait for a slot, hold it for one attempt, and learn from what the attempt reported."""
        slot = await self._acquire()
        try:
            yield slot
        finally:
            self._release(slot)

    async def _acquire(self) -> Call:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._waiters and self._admits(now):
            return self._start(now)
        waiter: asyncio.Future[Call] = loop.create_future()
        self._waiters.append(waiter)
        self._wake()
        try:
            slot = await waiter
            slot.waited_s = slot.started_at - now
            return slot
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Granted in the same instant it was cancelled: hand the slot on.
                self._release(waiter.result())
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def _admits(self, now: float) -> bool:
        return self.in_flight < self.size and now >= self._hold and self._budget_wait(now) == 0

    def _budget_wait(self, now: float) -> float:
        return max((mirror.wait_s(now) for mirror in self._mirrors.values()), default=0.0)

    def _start(self, now: float) -> Call:
        self.in_flight += 1
        for mirror in self._mirrors.values():
            mirror.charge(now)
        slot = Call(seq=self._next_seq, started_at=now)
        self._next_seq += 1
        return slot

    def _wake(self) -> None:
        """Start as many waiting calls as the limit, the holds and the budgets allow; when a
        hold or a refilling budget keeps one waiting, come back when it ends."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._waiters and self._admits(now):
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(self._start(now))
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiters and self.in_flight < self.size:
            until = max(self._hold, now + self._budget_wait(now))
            self._timer = loop.call_at(until, self._wake)

    def _release(self, slot: Call) -> None:
        now = asyncio.get_running_loop().time()
        was_full = self.in_flight >= self.size or bool(self._waiters)
        self.in_flight -= 1
        feedback = slot.feedback or Feedback(Outcome.OTHER)
        if feedback.outcome is Outcome.LIMITED:
            self._refund(slot)
        low = self._read_budgets(slot, feedback.budgets, now)
        if feedback.outcome is Outcome.LIMITED:
            if feedback.retry_after_s is not None:
                # A 429 "MAY include a Retry-After header indicating how long to wait before
                # making a new request" (RFC 6585, 4); Anthropic, rate limits: a 429 comes
                # "along with a retry-after header indicating how long to wait"; both SDKs wait
                # that long before a retry of their own. So nobody in this process asks before.
                self._hold_until(now + feedback.retry_after_s)
            elif not feedback.budgets:
                # Neither a wait nor a budget to pace by: a short hold, as the SDKs' backoff.
                self._hold_until(now + DEFAULT_HOLD_S)
            # With budgets and no retry-after, the mirrors pace the next calls: a budget's reset
            # is when it is full again, much later than when one call fits.
            self._decrease(slot, "a 429")
        elif feedback.outcome is Outcome.OVERLOADED:
            # 503 Service Unavailable may carry a Retry-After (RFC 9110, 10.2.3); Anthropic's 529
            # `overloaded_error` is the API "temporarily overloaded". Either way: fewer calls.
            if feedback.retry_after_s is not None:
                self._hold_until(now + feedback.retry_after_s)
            self._decrease(slot, "an overload")
        elif low is not None:
            # The vendor's own early warning (ECN's, in TCP's terms): slow down before a 429.
            # Routine at the vendor's limit, where the pacing keeps a budget: logged as debug.
            self._decrease(slot, f"{low} running low", routine=True)
        elif feedback.outcome is Outcome.ANSWERED and was_full:
            self._increase()
        self._wake()

    def _hold_until(self, until: float) -> None:
        self._hold = max(self._hold, until)

    def _decrease(self, slot: Call, why: str, *, routine: bool = False) -> None:
        if slot.seq < self._epoch_seq:
            return
        before = self.size
        self.limit = max(1.0, self.limit * DECREASE)
        self._threshold = self.limit
        self._epoch_seq = self._next_seq
        level = logging.DEBUG if routine else logging.INFO
        log.log(level, "%s: %s; calls in flight %d -> %d", self.name, why, before, self.size)

    def _increase(self) -> None:
        if self.limit >= self.ceiling:
            return
        step = 1.0 if self.limit < self._threshold else 1.0 / self.limit
        self.limit = min(float(self.ceiling), self.limit + step)

    def _refund(self, slot: Call) -> None:
        """A 429 took nothing from the vendor's budgets: give back what the mirrors charged."""
        self._refused.add(slot.seq)
        for mirror in self._mirrors.values():
            if mirror.synced is not None and slot.seq > mirror.synced.seq:
                mirror.level += mirror.cost

    def _charged(self, after: int, upto: int | None) -> int:
        upto = self._next_seq - 1 if upto is None else upto
        refused = sum(1 for seq in self._refused if after < seq <= upto)
        return max(0, upto - after - refused)

    def _read_budgets(self, slot: Call, budgets: tuple[Budget, ...], now: float) -> str | None:
        """Sync the mirrors with what the answer to `slot` reported; the name of a budget
        running low, if any."""
        low: str | None = None
        for budget in budgets:
            mirror = self._mirrors.setdefault(budget.name, Mirror())
            mirror.learn_cost(budget.spent)
            if mirror.synced is not None and slot.seq < mirror.synced.seq:
                continue  # an older answer than the one the mirror holds knows less
            left = mirror.sync(slot, budget, self._charged, now)
            floor = max(LOW_CALLS * mirror.cost, LOW_SHARE * (budget.limit or 0.0))
            if left < floor and low is None:
                low = budget.name
        synced = [m.synced.seq for m in self._mirrors.values() if m.synced is not None]
        if synced:
            # Older refusals fall before every mirror's answer: no count reaches back to them.
            oldest = min(synced)
            self._refused = {seq for seq in self._refused if seq > oldest}
        return low


@dataclass
class ModelLimits:
    """The limiters of one provider, one per model, made on first use."""

    provider: str
    start: int
    ceiling: int
    _limiters: dict[str, AdaptiveLimiter] = field(init=False, repr=False, default_factory=dict)

    def of(self, model: str) -> AdaptiveLimiter:
        limiter = self._limiters.get(model)
        if limiter is None:
            limiter = AdaptiveLimiter(
                name=f"{self.provider} model {model}", start=self.start, ceiling=self.ceiling
            )
            self._limiters[model] = limiter
        return limiter


@dataclass
class Queued:
    """The time one model call's attempts spent queued for a slot: the provider's failures did
    not take it, so the retry budget leaves it out (`clock`, for `with_retries`)."""

    seconds: float = 0.0

    def clock(self) -> float:
        return asyncio.get_running_loop().time() - self.seconds


@contextlib.asynccontextmanager
async def slot_for(
    limits: ModelLimits | None, model: str, queued: Queued | None = None
) -> AsyncIterator[Call]:
    """A slot of `model`'s limiter (its wait added to `queued`), or a free one when the
    provider has no limits."""
    if limits is None:
        yield Call(seq=0, started_at=0.0)
        return
    async with limits.of(model).call() as slot:
        if queued is not None:
            queued.seconds += slot.waited_s
        yield slot
