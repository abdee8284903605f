"""Retries for hosted model calls, and the translation of HTTP failures into engine errors.

Both official SDKs (openai, anthropic) have their own retry loops: "Certain errors are
automatically retried 2 times by default ... 429 Rate Limit, and >=500 Internal errors", and
"You can use the `max_retries` option to configure or disable retry settings" (their READMEs,
Retries). The adapters switch those off (`max_retries=0`) and use this one instead, so that every
provider shares one policy: exponential backoff with jitter, the server's `Retry-After` honoured,
and a bound on attempts and on the total time spent, after which the failure is final and says
what to do. It also means every attempt passes through the model's limiter
(`engine/providers/limiter.py`): an SDK retrying on its own would send requests the limiter
never counted, during the very wait a 429 asked of the whole process.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from engine.errors import LLMError, ModelNotAvailableError, RetriesExhaustedError
from engine.providers.limiter import Budget, Call, Feedback, Outcome, Queued

T = TypeVar("T")
log = logging.getLogger("debatebot.providers")

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
OVERLOAD_STATUSES = frozenset({503, 529})
"""A server that cannot keep up: 503 Service Unavailable, and Anthropic's 529
`overloaded_error`."""


def capacity_outcome(status: int) -> Outcome:
    """What an HTTP status says about the vendor's capacity, for the model's limiter."""
    if status < 400:
        return Outcome.ANSWERED
    if status == 429:
        return Outcome.LIMITED
    if status in OVERLOAD_STATUSES:
        return Outcome.OVERLOADED
    return Outcome.OTHER


def feedback(status: int, budgets: Sequence[Budget], headers: Mapping[str, str]) -> Feedback:
    """What an answer with `status` says to the model's limiter: the `budgets` its rate-limit
    headers gave, and, when the vendor was limiting or overloaded, the wait it asked for."""
    outcome = capacity_outcome(status)
    waits = outcome in (Outcome.LIMITED, Outcome.OVERLOADED)
    return Feedback(
        outcome, tuple(budgets), retry_after_s=parse_retry_after(headers) if waits else None
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: at most `max_attempts` calls and `total_budget_s` seconds in all."""

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    total_budget_s: float = 180.0

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based).

        The server's Retry-After wins when it sent one (plus a little jitter, so clients told the
        same moment do not all come back at once); otherwise "equal jitter" exponential backoff.
        """
        if retry_after_s is not None:
            return retry_after_s + rng.uniform(0.0, self.base_delay_s / 4)
        ceiling: float = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + rng.uniform(0.0, ceiling / 2)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms`, `retry-after` (seconds or an HTTP date), else None."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def header_count(text: str | None) -> float | None:
    """A rate-limit header's count; None when absent, unreadable or negative (a proxy's "-1"
    for no limit)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def redact(text: str, *secrets: str | None) -> str:
    """`text` with every given secret replaced, for messages that may echo a request."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def timed_out(slot: Call, *, what: str, timeout_s: float) -> LLMError:
    """The error for an attempt the SDK gave up on after `timeout_s`: retried, and reported to
    the limiter as an overload (a vendor that cannot keep up answers late)."""
    slot.report(Feedback(Outcome.OVERLOADED))
    return LLMError(f"{what} did not answer within {timeout_s:g}s", retryable=True)


def unreachable(error: Exception, *, provider: str, base_url: str | None, api_key: str) -> LLMError:
    """The error for an attempt that reached no server (DNS, refused connection, TLS): retried,
    with the SDK's reason, the key redacted from it."""
    return LLMError(
        f"cannot reach {provider} at {base_url or 'the default URL'}:"
        f" {redact(str(error), api_key)}",
        retryable=True,
    )


_NOISE = re.compile(r"\s+")


def status_error(
    *,
    provider: str,
    model: str,
    status: int,
    message: str,
    headers: Mapping[str, str],
    key_variable: str | None,
) -> LLMError:
    """The engine error for an HTTP error status from a provider, with how to fix it."""
    detail = _NOISE.sub(" ", message).strip()[:500]
    where = f"{provider} model {model}"
    if status in RETRYABLE_STATUSES:
        return LLMError(
            f"{where}: HTTP {status} ({detail})",
            retryable=True,
            retry_after_s=parse_retry_after(headers),
        )
    if status in (401, 403):
        fix = f"check {key_variable}" if key_variable else "check the server's credentials"
        return LLMError(f"{where}: the key was refused (HTTP {status}: {detail}); {fix}")
    if status == 404:
        # Both vendors answer 404 for a model they do not serve (Anthropic `not_found_error`
        # "model: …"; OpenAI `model_not_found`), retired ones included; never retried.
        return ModelNotAvailableError(
            f"model not available: {provider}:{model} is retired or misspelt; `debatebot models`"
            f" lists current ones (HTTP 404: {detail}; if the name is right, check the"
            " provider's base URL)"
        )
    return LLMError(f"{where}: the request was refused (HTTP {status}: {detail})")


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run `call`, retrying retryable `LLMError`s under `policy`.

    Raises the error itself when it is not retryable, and `RetriesExhaustedError` (naming the
    attempts, the time and the last cause) when the attempts or the time budget run out.
    """
    rng = rng or random.Random()
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except LLMError as error:
            if not error.retryable:
                raise
            elapsed = clock() - started
            delay = policy.delay(attempt, error.retry_after_s, rng)
            if attempt >= policy.max_attempts or elapsed + delay > policy.total_budget_s:
                raise RetriesExhaustedError(
                    f"{what} failed {attempt} times in {elapsed:.1f}s, giving up: {error}. The"
                    " provider may be down or rate-limiting this key; try again later, or raise"
                    " DEBATEBOT_LLM_MAX_ATTEMPTS / DEBATEBOT_LLM_RETRY_BUDGET_S"
                ) from error
            log.warning(
                "%s failed (attempt %d of %d): %s; retrying in %.1fs",
                what,
                attempt,
                policy.max_attempts,
                error,
                delay,
            )
            await sleep(delay)


async def timed_attempts(
    attempt: Callable[[Queued], Awaitable[T]], *, policy: RetryPolicy, what: str
) -> tuple[T, float]:
    """Run `attempt` under `policy` (each try given the `Queued` its limiter slot adds its wait
    to, which the retry budget leaves out); the answer and the model's time: the wall time less
    what the tries spent queued behind the model's limit."""
    started = time.perf_counter()
    queued = Queued()
    answer = await with_retries(
        lambda: attempt(queued), policy=policy, what=what, clock=queued.clock
    )
    return answer, max(0.0, time.perf_counter() - started - queued.seconds)
