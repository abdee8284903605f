"""Every way a Slack call fails becomes a PostError saying what happened and whether to retry."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.messages.kit import Message
from bot.outbound import Failure, OutboundError
from bot.slackweb.errors import PostError, UnthreadedError
from bot.slackweb.poster import SlackPoster, classify


def api_error(status: int, data: Any, headers: dict[str, str] | None = None) -> SlackApiError:
    response = AsyncSlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.invalid/api/chat.postMessage",
        req_args={},
        data=data,
        headers=headers or {},
        status_code=status,
    )
    return SlackApiError("failed", response)


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        (
            api_error(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "7"}),
            "ratelimited",
            True,
        ),
        (api_error(500, {"ok": False, "error": "internal_error"}), "internal_error", True),
        (api_error(503, {}), "http_503", True),
        (api_error(502, "<html>Bad Gateway</html>"), "http_502", True),
        (api_error(200, {"ok": False, "error": "fatal_error"}), "fatal_error", True),
        (api_error(200, {"ok": False, "error": "not_in_channel"}), "not_in_channel", False),
        (
            api_error(200, {"ok": False, "error": "msg_blocks_too_long"}),
            "msg_blocks_too_long",
            False,
        ),
        (api_error(200, {"ok": False, "error": "message_not_found"}), "message_not_found", False),
        (api_error(400, "not json"), "bad_response", True),
        (TimeoutError(), "timeout", True),
        (aiohttp.ClientConnectionError(), "unreachable", True),
        (SlackRequestError("connection reset"), "unreachable", True),
        (ValueError("Expecting value: line 1 column 1"), "unreachable", True),
        (
            OutboundError(Failure.REDIRECT, "HTTP 307", target="proxy.test:8443"),
            "redirected",
            True,
        ),
    ],
)
def test_each_failure_is_classified(error: Exception, code: str, retryable: bool) -> None:
    classified = classify(error, "chat_postMessage", "C1")

    assert (classified.code, classified.retryable) == (code, retryable)
    assert str(classified), "the reason is never empty"
    assert "C1" in str(classified)


def test_retry_after_is_carried() -> None:
    error = api_error(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "7"})
    assert classify(error, "chat_postMessage", "C1").retry_after_s == 7.0


class FlakyClient:
    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"ok": True, "channel": kwargs["channel"], "ts": "1.1"}


async def test_the_poster_waits_out_a_429_and_raises_other_failures_at_once() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    limited = api_error(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "2"})
    client = FlakyClient(limited, TimeoutError())
    poster = SlackPoster(client, interval_s=0, sleep=sleep, clock=lambda: 0.0)  # type: ignore[arg-type]
    message = Message("hi", [])

    with pytest.raises(PostError) as raised:
        await poster.post(channel="C1", message=message)

    assert raised.value.code == "timeout"
    assert slept == [2.0]
    posted = await poster.post(channel="C1", message=message, attempts=1)
    assert (posted.channel, posted.ts) == ("C1", "1.1")


class NoTsClient:
    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        return {"ok": True, "channel": kwargs["channel"]}


async def test_a_success_without_a_ts_is_refused_rather_than_reposted() -> None:
    poster = SlackPoster(NoTsClient(), interval_s=0)  # type: ignore[arg-type]

    with pytest.raises(PostError) as raised:
        await poster.post(channel="C1", message=Message("hi", []))

    assert (raised.value.code, raised.value.retryable) == ("bad_response", False)
    assert "returned no ts" in str(raised.value)


async def test_a_long_retry_after_holds_the_channel_as_given_and_is_left_to_the_outbox() -> None:
    """`Retry-After: 40` is not cut to the poster's own wait: the call raises at once (the
    outbox schedules it after 40 s) and the channel waits the whole 40 s."""
    slept: list[float] = []
    now = [100.0]

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limited = api_error(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "40"})
    poster = SlackPoster(
        FlakyClient(limited),  # type: ignore[arg-type]
        interval_s=0,
        sleep=sleep,
        clock=lambda: now[0],
    )
    with pytest.raises(PostError) as raised:
        await poster.post(channel="C1", message=Message("hi", []), attempts=3)
    assert (raised.value.code, raised.value.retry_after_s) == ("ratelimited", 40.0)
    assert slept == []

    await poster.post(channel="C1", message=Message("again", []), attempts=1)
    assert slept == [40.0]


class UnthreadingClient:
    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        stored = {"ts": "9.9", "text": kwargs["text"]}  # no thread_ts: posted top-level
        return {"ok": True, "channel": kwargs["channel"], "ts": "9.9", "message": stored}


async def test_a_reply_slack_stores_outside_its_thread_is_caught() -> None:
    poster = SlackPoster(UnthreadingClient(), interval_s=0)  # type: ignore[arg-type]

    with pytest.raises(UnthreadedError) as raised:
        await poster.post(channel="C1", message=Message("hi", []), thread_ts="1.1")

    assert raised.value.code == "unthreaded"
    assert (raised.value.stray.channel, raised.value.stray.ts) == ("C1", "9.9")
    top_level = await poster.post(channel="C1", message=Message("hi", []))
    assert top_level.ts == "9.9", "a top-level post has no thread to check"


def test_a_refused_redirect_says_where_it_pointed_and_what_to_check() -> None:
    refused = OutboundError(Failure.REDIRECT, "HTTP 307", target="proxy.test:8443")

    said = str(classify(refused, "chat_postMessage", "C1"))

    assert said.startswith(
        "Slack's answer to chat_postMessage in C1 was a redirect to proxy.test:8443, which the"
        " bot does not follow"
    )
    assert "DEBATEBOT_SLACK_API_URL" in said
