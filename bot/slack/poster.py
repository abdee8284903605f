"""The one way the bot writes to Slack: paced per channel, in order, honouring 429 Retry-After.

Slack allows about one message per second per channel. Every write to a channel waits its turn
behind one lock, so messages land in the order they were asked for, and a 429 holds the whole
channel for `Retry-After` seconds before the same call is tried again. Other Slack errors are
logged with the method, channel and Slack's error code and raised as `PostError`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slack.blocks import Message
from bot.slack.errors import PostError

log = logging.getLogger(__name__)


def _retry_after(error: SlackApiError, default: float) -> float:
    headers = {str(k).lower(): v for k, v in (error.response.headers or {}).items()}
    raw = headers.get("retry-after")
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except (TypeError, ValueError):
        return default


class SlackPoster:
    """Paced, ordered, rate-limit-aware chat writes for one bot token."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        interval_s: float = 1.0,
        max_attempts: int = 8,
        max_retry_after_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.interval_s = interval_s
        self.max_attempts = max_attempts
        self.max_retry_after_s = max_retry_after_s
        self._clock = clock
        self._sleep = sleep
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._next_at: dict[str, float] = {}

    async def _call(self, method: str, channel: str, **kwargs: Any) -> AsyncSlackResponse:
        api = getattr(self.client, method)
        async with self._locks[channel]:
            for attempt in range(1, self.max_attempts + 1):
                wait = self._next_at.get(channel, 0.0) - self._clock()
                if wait > 0:
                    await self._sleep(wait)
                try:
                    response: AsyncSlackResponse = await api(channel=channel, **kwargs)
                except SlackApiError as error:
                    if error.response.status_code == 429:
                        delay = min(_retry_after(error, 1.0), self.max_retry_after_s)
                        log.warning(
                            "slack %s in %s rate limited (attempt %d/%d); retrying in %.1fs",
                            method,
                            channel,
                            attempt,
                            self.max_attempts,
                            delay,
                        )
                        self._next_at[channel] = self._clock() + delay
                        continue
                    code = str(error.response.get("error", "unknown_error"))
                    log.error("slack %s in %s failed: %s", method, channel, code)
                    raise PostError(
                        f"Slack refused {method} in {channel}: {code}", code=code
                    ) from error
                except (SlackClientError, aiohttp.ClientError, TimeoutError) as error:
                    log.error("slack %s in %s could not be sent: %s", method, channel, error)
                    raise PostError(
                        f"could not reach Slack for {method} in {channel}: {error}",
                        code="unreachable",
                    ) from error
                self._next_at[channel] = self._clock() + self.interval_s
                return response
        raise PostError(
            f"Slack kept rate limiting {method} in {channel}; gave up after {self.max_attempts}"
            " attempts",
            code="ratelimited",
        )

    async def post(self, *, channel: str, message: Message, thread_ts: str | None = None) -> str:
        """Post a message (in a thread when `thread_ts` is given); returns its ts."""
        response = await self._call(
            "chat_postMessage",
            channel,
            text=message.text,
            blocks=message.blocks,
            thread_ts=thread_ts,
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response["ts"])

    async def update(self, *, channel: str, ts: str, message: Message) -> None:
        await self._call("chat_update", channel, ts=ts, text=message.text, blocks=message.blocks)

    async def ephemeral(
        self, *, channel: str, user: str, text: str, thread_ts: str | None = None
    ) -> None:
        """A message only `user` sees; refusals and confirmations go this way."""
        await self._call("chat_postEphemeral", channel, user=user, text=text, thread_ts=thread_ts)
