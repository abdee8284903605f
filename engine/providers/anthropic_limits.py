"""Anthropic's rate-limit headers read for the limiter: what an answer said of the key's
request and token budgets, and when each refills."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engine.providers.limiter import Budget, Feedback
from engine.providers.retry import feedback, header_count


def seconds_until(text: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from `now` to an RFC 3339 time ("2026-05-01T12:00:30Z"), at least 0; None when
    absent or unreadable. The vendor's clock and this one differ by their skew."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def rate_feedback(
    headers: Mapping[str, str], *, status: int, usage: Any = None, now: datetime | None = None
) -> Feedback:
    """What an answer with `status` and `headers` said of the key's limits, for the limiter;
    `usage` is the answer's (None when it was refused).

    Anthropic, rate limits (response headers): `anthropic-ratelimit-requests-*`,
    `-input-tokens-*` and `-output-tokens-*`, each `-limit`, `-remaining` and `-reset` ("the
    time when the rate limit will be fully replenished, provided in RFC 3339 format");
    `anthropic-ratelimit-tokens-*` shows "the most restrictive limit currently in effect", read
    only when the input and output ones are missing. Of the input tokens, the ones read from
    the cache are left out ("only uncached input tokens count towards your ITPM rate limits"
    on current models). A 429 says how long to wait in `retry-after`.
    """
    read = (getattr(usage, "input_tokens", 0) or 0) + (
        getattr(usage, "cache_creation_input_tokens", 0) or 0
    )
    written = getattr(usage, "output_tokens", 0) or 0
    spent = {
        "requests": 1.0,
        "input-tokens": float(read),
        "output-tokens": float(written),
        "tokens": float(read + written),
    }
    prefix = "anthropic-ratelimit-"
    names = ["requests", "input-tokens", "output-tokens"]
    if not any(f"{prefix}{name}-remaining" in headers for name in names[1:]):
        names.append("tokens")
    budgets: list[Budget] = []
    for name in names:
        remaining = header_count(headers.get(f"{prefix}{name}-remaining"))
        if remaining is None:
            continue
        budgets.append(
            Budget(
                name=name,
                remaining=remaining,
                limit=header_count(headers.get(f"{prefix}{name}-limit")) or None,
                reset_s=seconds_until(headers.get(f"{prefix}{name}-reset"), now=now),
                spent=spent[name],
            )
        )
    return feedback(status, budgets, headers)
