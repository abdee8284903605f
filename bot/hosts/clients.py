"""The REST calls to GitHub's v3 and GitLab's v4 APIs, on `bot.outbound`: the token only to the
configured API address and never along a redirect, lists read page by page by number up to a
bound, every answer capped, one deadline per fetch or comment (`DEBATEBOT_HOST_TIMEOUT_S`), and
failures (a private repository, a rate limit, a host too slow) said in words."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from bot.hosts.answers import PAGE
from bot.hosts.links import HostConfig, HostLink, LinkError
from bot.outbound import (
    Failure,
    Joined,
    Origin,
    Outbound,
    OutboundError,
    size_text,
)

T = TypeVar("T")


MAX_COMMENTS = 3000
"""Of a pull request's comments, the ones searched for the bot's own."""


PER_PAGE = 100


ANSWER_BYTES = 8 * 1024 * 1024
"""The largest other answer read: a page of 100 changed files with their diffs, a merge
request's description (GitLab allows a megabyte)."""


RATE_LIMIT_WAIT_S = 60.0


CONNECTIONS = 8
"""Connections kept open to the code hosts at once, shared by every fetch and comment of the
process: a linked ADR reads a few pages one after another, and a burst of links waits its turn
rather than open a connection each."""


class HostAnswerError(Exception):
    """The host answered with an error status (4xx, 5xx); `HostClients.call` words it."""

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = dict(headers)


class HostClients:
    """Both hosts' APIs through one guarded HTTP session (`bot.outbound`) of at most
    CONNECTIONS pooled connections, opened on first use and closed by `aclose()` (its owner,
    `DebateServices`, one per process, closes it on shutdown)."""

    def __init__(self, config: HostConfig, sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.config = config
        self._sleep = sleep
        self._http: Outbound | None = None

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    def origin(self, host: str) -> Origin:
        """Where `host`'s token may go: its API address, exactly, and nothing under it but
        the API."""
        if host == "github":
            return Origin.of(self.config.github_api)
        return Origin.of(f"{self.config.gitlab_api}/api/v4")

    def _headers(self, host: str) -> tuple[dict[str, str], dict[str, str]]:
        """(plain headers, credential headers) as the hosts' own clients send them."""
        if host == "github":
            token = self.config.github_token
            return (
                {"Accept": "application/vnd.github+json"},
                {"Authorization": f"token {token}"} if token else {},
            )
        token = self.config.gitlab_token
        return {}, ({"PRIVATE-TOKEN": token} if token else {})

    async def request(
        self,
        link: HostLink,
        method: str,
        *segments: str | Joined,
        query: Mapping[str, str | int] | None = None,
        body: Any = None,
        max_bytes: int = ANSWER_BYTES,
    ) -> Any:
        """`method` on the API path `segments` of `link`'s host; the answer's JSON.
        HostAnswerError for an error status, OutboundError when no whole answer came, LinkError
        for an answer that is not the API's JSON."""
        if self._http is None:
            self._http = Outbound(timeout_s=self.config.timeout_s, connections=CONNECTIONS)
        origin = self.origin(link.host)
        headers, credential = self._headers(link.host)
        answer = await self._http.send(
            origin,
            method,
            origin.url(*segments, query=query),
            credential=credential,
            headers=headers,
            body=body,
            max_bytes=max_bytes,
        )
        if not 200 <= answer.status < 300:
            raise HostAnswerError(answer.status, answer.headers)
        try:
            return answer.json()
        except ValueError:
            raise self._not_api(link) from None

    async def read(
        self,
        link: HostLink,
        shape: TypeAdapter[T],
        *segments: str | Joined,
        query: Mapping[str, str | int] | None = None,
        max_bytes: int = ANSWER_BYTES,
    ) -> T:
        """GET `segments`, checked against the shape the API answers with."""
        found = await self.request(link, "GET", *segments, query=query, max_bytes=max_bytes)
        return self.shaped(link, shape, found)

    def shaped(self, link: HostLink, shape: TypeAdapter[T], found: Any) -> T:
        try:
            return shape.validate_python(found)
        except ValidationError:
            raise self._not_api(link) from None

    async def pages(
        self, link: HostLink, *segments: str | Joined, limit: int
    ) -> list[dict[str, Any]]:
        """A list the API pages, page by page by number (`per_page`, `page`), until a short
        page or `limit` items."""
        items: list[dict[str, Any]] = []
        for page in range(1, limit // PER_PAGE + 2):
            batch = await self.read(
                link, PAGE, *segments, query={"per_page": PER_PAGE, "page": page}
            )
            items.extend(batch)
            if len(batch) < PER_PAGE or len(items) >= limit:
                break
        return items[:limit]

    def _not_api(self, link: HostLink) -> LinkError:
        name = host_name(link)
        return LinkError(
            f"{name} answered `{link.label}` with something that is not its API's answer; check"
            f" {api_setting(link)}"
        )

    async def call(self, link: HostLink, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` (the requests of one fetch or comment) within the deadline; turn the
        host's refusals and failures into LinkError, waiting out a rate limit that resets
        within RATE_LIMIT_WAIT_S (once, outside the deadline)."""
        for attempt in (1, 2):
            try:
                async with asyncio.timeout(self.config.timeout_s):
                    return await work()
            except HostAnswerError as error:
                wait_s, message, transient = self._refusal(link, error.status, error.headers)
                if wait_s is not None and wait_s <= RATE_LIMIT_WAIT_S and attempt == 1:
                    await self._sleep(max(wait_s, 0.0))
                    continue
                raise LinkError(message, transient=transient) from error
            except OutboundError as error:
                raise LinkError(self._failure(link, error), transient=error.transient) from error
            except TimeoutError as error:
                raise LinkError(self._too_slow(link), transient=True) from error
        raise AssertionError("unreachable: the loop returns or raises")

    def _too_slow(self, link: HostLink) -> str:
        return (
            f"{host_name(link)} did not answer within {self.config.timeout_s:g} s; try again later"
        )

    def _failure(self, link: HostLink, error: OutboundError) -> str:
        """What people are told when no whole answer came."""
        name = host_name(link)
        if error.failure is Failure.REDIRECT:
            return (
                f"{name} answered with a redirect to {error.target}; the bot never follows a"
                f" redirect with its token. If the API moved, set {api_setting(link)} to its"
                " address"
            )
        if error.failure is Failure.TOO_LARGE:
            return (
                f"{name}'s answer for `{link.label}` is larger than {size_text(error.limit)},"
                " the most I read of one answer, so I used none of it"
            )
        if error.failure is Failure.INCOMPLETE:
            return (
                f"{name}'s answer for `{link.label}` was cut off before it was whole, so I used"
                " none of it; try again later"
            )
        if error.failure is Failure.DEADLINE:
            return self._too_slow(link)
        if error.failure is Failure.UNSAFE_PATH:
            return (
                f"{name} listed a file in `{link.label}` whose path holds {error.detail}, which"
                " could reach outside the repository; I did not fetch it"
            )
        if error.failure is Failure.OFF_ORIGIN:
            return (
                f"the bot sends its {name} token only to {self.origin(link.host).address};"
                f" {error.target} is elsewhere. Check {api_setting(link)}"
            )
        return f"I could not reach {name} ({error.detail}); try later"

    def _refusal(
        self, link: HostLink, status: int, headers: Mapping[str, str]
    ) -> tuple[float | None, str, bool]:
        """(seconds to wait before one more try, or None; what to tell people; whether a
        later try may succeed)."""
        name = host_name(link)
        variable = "DEBATEBOT_GITHUB_TOKEN" if link.host == "github" else "DEBATEBOT_GITLAB_TOKEN"
        lowered = {k.lower(): v for k, v in headers.items()}
        reset = reset_in(lowered)
        if status == 429 or (status == 403 and (lowered.get("x-ratelimit-remaining") == "0")):
            at = datetime.fromtimestamp(time.time() + (reset or 60), UTC).strftime("%H:%M UTC")
            return reset, f"{name}'s rate limit is used up; ask again after {at}", True
        if status in (403, 404):
            return (
                None,
                f"I cannot see `{link.label}` on {name}: the repository is private or the link is"
                f" wrong. Give the bot a token that can read it ({variable}), or check the link",
                False,
            )
        if status == 401:
            return None, f"{name} refused the bot's token ({variable}): replace it", False
        answered = f"{name} answered HTTP {status} for `{link.label}`"
        if status >= 500:
            return None, f"{answered}; try again later", True
        return None, answered, False


def host_name(link: HostLink) -> str:
    return "GitHub" if link.host == "github" else "GitLab"


def api_setting(link: HostLink) -> str:
    return "DEBATEBOT_GITHUB_API_URL" if link.host == "github" else "DEBATEBOT_GITLAB_API_URL"


def reset_in(headers: dict[str, str]) -> float | None:
    """Seconds until the host's rate limit resets (Retry-After, or a reset epoch)."""
    if "retry-after" in headers:
        try:
            return float(headers["retry-after"])
        except ValueError:
            return None
    for key in ("x-ratelimit-reset", "ratelimit-reset"):
        if key in headers:
            try:
                return max(0.0, float(headers[key]) - time.time())
            except ValueError:
                return None
    return None
