"""What each vendor's rate-limit headers tell the limiter (`rate_feedback` of each adapter)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from engine.providers import anthropic_limits, openai_chat
from engine.providers.limiter import Budget, Outcome
from engine.providers.openai_chat import parse_duration
from engine.providers.retry import capacity_outcome


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0s", 0.0),
        ("2.5", 2.5),
        ("", None),
        ("soon", None),
        ("6m0sx", None),
    ],
)
def test_openai_reset_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_openai_headers_give_the_request_and_token_budgets() -> None:
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    feedback = openai_chat.rate_feedback(headers, status=200, tokens=1_100)
    assert feedback.outcome is Outcome.ANSWERED
    assert feedback.retry_after_s is None
    assert feedback.budgets == (
        Budget("requests", 59, 60, reset_s=1.0, spent=1),
        Budget("tokens", 149_984, 150_000, reset_s=360.0, spent=1_100),
    )


def test_an_openai_429_carries_its_retry_after_and_a_server_without_headers_none() -> None:
    limited = openai_chat.rate_feedback(
        {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}, status=429
    )
    assert limited.outcome is Outcome.LIMITED
    assert limited.retry_after_s == 7.0
    assert limited.budgets == (Budget("requests", 0, None, reset_s=None, spent=1),)
    plain = openai_chat.rate_feedback({"x-ratelimit-remaining-tokens": "-1"}, status=200)
    assert plain.budgets == (), "a proxy's -1 means no limit, not an empty one"


def test_anthropic_headers_give_requests_and_input_and_output_tokens() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-05-01T12:00:01.2Z",
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
        "anthropic-ratelimit-input-tokens-reset": "2026-05-01T12:00:02Z",
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "7900",
        "anthropic-ratelimit-output-tokens-reset": "2026-05-01T11:59:59Z",
        "anthropic-ratelimit-tokens-remaining": "7900",
    }
    usage = SimpleNamespace(
        input_tokens=200,
        cache_creation_input_tokens=100,
        cache_read_input_tokens=700,
        output_tokens=90,
    )
    feedback = anthropic_limits.rate_feedback(headers, status=200, usage=usage, now=now)
    assert feedback.outcome is Outcome.ANSWERED
    requests, *tokens = feedback.budgets
    assert requests.reset_s == pytest.approx(1.2)
    assert (requests.remaining, requests.limit, requests.spent) == (49, 50, 1)
    assert tokens == [
        Budget("input-tokens", 39_000, 40_000, reset_s=2.0, spent=300),
        Budget("output-tokens", 7_900, 8_000, reset_s=0.0, spent=90),
    ], "cache reads are not counted; a reset already past is now; the combined one is skipped"


def test_anthropic_combined_tokens_stand_in_when_input_and_output_are_missing() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    headers = {
        "anthropic-ratelimit-tokens-limit": "96000",
        "anthropic-ratelimit-tokens-remaining": "95000",
        "anthropic-ratelimit-tokens-reset": "2026-05-01T12:00:30+00:00",
        "retry-after": "12",
    }
    feedback = anthropic_limits.rate_feedback(headers, status=429, now=now)
    assert feedback.outcome is Outcome.LIMITED
    assert feedback.retry_after_s == 12.0
    assert feedback.budgets == (Budget("tokens", 95_000, 96_000, reset_s=30.0, spent=0),)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.ANSWERED),
        (429, Outcome.LIMITED),
        (503, Outcome.OVERLOADED),
        (529, Outcome.OVERLOADED),
        (500, Outcome.OTHER),
        (400, Outcome.OTHER),
    ],
)
def test_what_a_status_says_of_capacity(status: int, outcome: Outcome) -> None:
    assert capacity_outcome(status) is outcome
