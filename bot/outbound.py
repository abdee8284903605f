"""The only way a credential leaves the process over HTTP: the GitHub and GitLab APIs
(`bot.hosts`) and Slack's file downloads (`bot.slackweb.files`) all send through `Outbound`.

- A request carries its credential only to the exact origin it belongs to (scheme, host and
  port) and under that origin's base path; anything else is refused before it is sent.
- Paths are built from checked segments: `.`, `..`, empty segments, and segments that decode
  (once or twice) to a `/`, a `\\` or a control character are refused, then each is
  percent-encoded again, so a link or a host's answer cannot steer a request elsewhere.
- A redirect is never followed: a 3xx is an error naming where it pointed. This one rule is
  the pooled sessions' own (`refuse_redirects`), so it holds for every request on them, the
  Slack Web API client's and `response_url` answers included, not only for `Outbound`'s.
- A body is streamed and refused as soon as it passes its cap (or its Content-Length claims
  more); a connection that closes before the body is whole is an error, never a short body.
- Every request has one total deadline, however slowly the other end drips its answer.

Connections are pooled (`pooled_session`): a bounded number per session, kept alive between
requests, so a burst of calls reuses a few connections instead of opening (and, over TLS,
handshaking) one each. Each process has one session for the code hosts (`bot.hosts.clients`)
and one for Slack (`bot.wiring.slack_session`), which the Web API client (the bot's calls,
Bolt's, the OAuth code exchange and token rotation), the `response_url` answers and the file
downloads share.

aiohttp is imported when the first session is made, so commands that never send a request do
not pay for loading it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlencode, urlsplit

if TYPE_CHECKING:
    import aiohttp
    import yarl

USER_AGENT = "debatebot"
DEFAULT_PORTS = {"http": 80, "https": 443}
KEEPALIVE_S = 15.0
"""How long an idle pooled connection is kept for the next request: short enough that the
other end (which may drop idle connections after a minute) has not closed it first."""


class Failure(StrEnum):
    """Why a request gave no whole answer (or was never sent)."""

    REDIRECT = "redirect"
    TOO_LARGE = "too large"
    INCOMPLETE = "incomplete"
    DEADLINE = "deadline"
    UNREACHABLE = "unreachable"
    OFF_ORIGIN = "off origin"
    UNSAFE_PATH = "unsafe path"


TRANSIENT = frozenset({Failure.INCOMPLETE, Failure.DEADLINE, Failure.UNREACHABLE})
"""Failures the same request may not meet again later."""


class OutboundError(Exception):
    """A request that was refused before it was sent, or gave no whole answer. `failure` says
    which; `target` is where a redirect or an off-origin address pointed, or the unsafe path;
    `limit` the cap passed or the deadline in seconds; `detail` the underlying error's name.
    Callers word the answer for people (they know what was being fetched)."""

    def __init__(
        self,
        failure: Failure,
        message: str,
        *,
        target: str = "",
        limit: float = 0,
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.failure = failure
        self.target = target
        self.limit = limit
        self.detail = detail

    @property
    def transient(self) -> bool:
        return self.failure in TRANSIENT


def size_text(n: float) -> str:
    """A byte count as people read it: `500 KB`, `8 MB`."""
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):,.0f} MB"
    return f"{n // 1024:,.0f} KB"


# --- paths -------------------------------------------------------------------------------------


def _unsafe(decoded: str) -> str | None:
    """What makes `decoded` unusable as one path segment, or None."""
    if decoded in ("", ".", ".."):
        return f"a `{decoded}` segment" if decoded else "an empty segment"
    if "/" in decoded:
        return "an encoded `/` inside a segment"
    if "\\" in decoded:
        return "a `\\`"
    if any(ord(c) < 32 or ord(c) == 127 for c in decoded):
        return "a control character"
    return None


def check_segment(decoded: str) -> str:
    """`decoded` if it is a safe single path segment; OutboundError (UNSAFE_PATH) if not. A
    segment that decodes a second time into something unsafe (`%252e%252e`) is refused too, in
    case a server on the way decodes twice."""
    why = _unsafe(decoded) or _unsafe(unquote(decoded))
    if why is not None:
        raise OutboundError(
            Failure.UNSAFE_PATH, f"its path holds {why}", target=decoded, detail=why
        )
    return decoded


def decode_segment(raw: str) -> str:
    """A percent-encoded segment of a link, decoded and checked (see `check_segment`)."""
    return check_segment(unquote(raw))


def split_path(path: str) -> list[str]:
    """A decoded path (`docs/adr/0001.md`) as its checked segments."""
    return [check_segment(part) for part in path.split("/")]


@dataclass(frozen=True)
class Joined:
    """A path sent as one segment with its slashes encoded (GitLab's project and file ids:
    `acme%2Fplatform%2Forders`); each part is checked like a segment of its own."""

    path: str


# --- origins -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """Where one credential may go: a scheme, host and port, and a base path it stays under."""

    scheme: str
    host: str
    port: int
    base: str = ""
    """The raw path every request starts with, without its trailing slash (`/api/v3`)."""

    @classmethod
    def of(cls, url: str) -> Origin:
        """The origin of `url`, and its path as the base."""
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        return cls(
            scheme=scheme,
            host=(parts.hostname or "").lower(),
            port=port or DEFAULT_PORTS.get(scheme, 0),
            base=parts.path.rstrip("/"),
        )

    @property
    def address(self) -> str:
        """`https://host` (the port only when it is not the scheme's usual one)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if DEFAULT_PORTS.get(self.scheme) == self.port:
            return f"{self.scheme}://{host}"
        return f"{self.scheme}://{host}:{self.port}"

    def url(self, *segments: str | Joined, query: Mapping[str, str | int] | None = None) -> str:
        """The base followed by `segments` (each decoded text, checked and encoded here), with
        `query` encoded as the query string."""
        encoded = []
        for segment in segments:
            if isinstance(segment, Joined):
                encoded.append(quote("/".join(split_path(segment.path)), safe=""))
            else:
                encoded.append(quote(check_segment(segment), safe=""))
        url = f"{self.address}{self.base}/{'/'.join(encoded)}"
        return f"{url}?{urlencode(query)}" if query else url

    def admits(self, url: str) -> bool:
        """Whether `url` is on exactly this origin, under its base path, with no segment that
        climbs out of it (raw or encoded `.`/`..`, a `\\`, a control character) and no user
        name or password in it."""
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)
        except ValueError:
            return False
        if (parts.scheme.lower(), (parts.hostname or "").lower(), port) != (
            self.scheme,
            self.host,
            self.port,
        ):
            return False
        if parts.username is not None or parts.password is not None:
            return False
        path = parts.path
        if not (path == self.base or path.startswith(self.base + "/")):
            return False
        for raw in path[len(self.base) :].split("/"):
            for decoded in (unquote(raw), unquote(unquote(raw))):
                for part in decoded.split("/"):
                    if part in (".", "..") or (part and _unsafe(part) is not None):
                        return False
        return True


# --- requests ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A response: its status, headers (names in lower case) and, for a 2xx, its whole body;
    the body of any other status is not read."""

    status: int
    headers: dict[str, str]
    body: bytes = b""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body)


def pooled_session(*, connections: int, timeout_s: float) -> aiohttp.ClientSession:
    """An HTTP session holding at most `connections` connections at once (more requests wait
    for one to be free), each kept alive KEEPALIVE_S for the next request; `timeout_s` is each
    request's total deadline unless the request sets its own. No cookie is kept, no proxy is
    read from the environment and no redirect is followed (`refuse_redirects`), whatever host
    answers and whoever sends the request. Made inside the running event loop; whoever makes
    it closes it."""
    import aiohttp

    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=connections, limit_per_host=connections, keepalive_timeout=KEEPALIVE_S
        ),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        # Cookies one host sets are never sent to another, nor kept.
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
        middlewares=(refuse_redirects,),
    )


async def refuse_redirects(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """The pooled sessions' middleware: a 3xx answer is closed unread and raised as
    OutboundError (REDIRECT) naming where it pointed, so aiohttp never follows it, whoever sent
    the request (slack_sdk's calls leave aiohttp's `allow_redirects` on)."""
    response = await handler(request)
    # Slack's Web API answers a refusal with HTTP 200 and `"ok": false` and an error code, a
    # rate limit with 429 and Retry-After, a failure with a 5xx (bot.slackweb.poster.classify);
    # it documents no 3xx for any method, nor for a `response_url` or an upload address. The
    # code hosts' calls are held to the same rule. A 3xx is something between the bot and the
    # host (a proxy, a wrong address setting) rewriting answers.
    if not 300 <= response.status < 400:
        return response
    # Followed, a redirect would keep the Authorization header on the same origin, and a 307 or
    # 308 would send the body again wherever it points (oauth.v2.access: the OAuth code or the
    # refresh token; its client secret is in the Authorization header). So none is followed.
    status, asked = response.status, response.url
    location = response.headers.get("Location", "")
    response.close()
    pointed = _resolved(asked, location) if location else ""
    raise OutboundError(
        Failure.REDIRECT,
        f"{request.method} {_shown(str(asked))} was answered HTTP {status}, a redirect to"
        f" {_shown(pointed) if pointed else 'an address it did not name'}, which was not"
        " followed: a credential goes only to the host it belongs to, never along a redirect",
        target=_where(pointed),
    )


class Outbound:
    """Requests each checked against its origin, never redirected, capped and given one total
    deadline (`timeout_s`), on `session` (a `pooled_session` its owner closes) or on a pooled
    session of its own of `connections`, made on first use and ended by `aclose()`."""

    def __init__(
        self,
        *,
        timeout_s: float,
        session: aiohttp.ClientSession | None = None,
        connections: int = 4,
    ) -> None:
        self.timeout_s = timeout_s
        self.connections = connections
        self._shared = session
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Outbound:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End the session it made (a shared one is its owner's to close)."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._shared is not None:
            return self._shared
        if self._session is None or self._session.closed:
            self._session = pooled_session(connections=self.connections, timeout_s=self.timeout_s)
        return self._session

    async def send(
        self,
        origin: Origin,
        method: str,
        url: str,
        *,
        credential: Mapping[str, str],
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        data: bytes | None = None,
    ) -> Answer:
        """Send `method url` with `credential` (headers) and `body` (as JSON) or `data` (raw
        bytes) when `url` is on `origin`; the answer, its 2xx body read whole up to
        `max_bytes`. OutboundError when `url` is elsewhere, on a redirect, a body past the cap
        or cut short, the deadline, or a connection that fails."""
        if not origin.admits(url):
            raise OutboundError(
                Failure.OFF_ORIGIN,
                f"{url} is not under {origin.address}{origin.base}",
                target=_where(url),
            )
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._send(method, url, credential, max_bytes, headers, body, data)
        except TimeoutError as error:
            raise OutboundError(
                Failure.DEADLINE,
                f"no whole answer within {self.timeout_s:g} s",
                limit=self.timeout_s,
                detail=type(error).__name__,
            ) from error

    async def _send(
        self,
        method: str,
        url: str,
        credential: Mapping[str, str],
        max_bytes: int,
        headers: Mapping[str, str] | None,
        body: Any,
        data: bytes | None,
    ) -> Answer:
        import aiohttp
        from yarl import URL

        try:
            async with self._client().request(
                method,
                # Sent exactly as built: yarl would otherwise resolve dot segments itself.
                URL(url, encoded=True),
                headers={**(headers or {}), **credential},
                json=body,
                data=data,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=self.timeout_s,
                    sock_connect=min(10.0, self.timeout_s),
                    sock_read=self.timeout_s,
                ),
            ) as response:
                # A 3xx never gets here: the pooled session raised it (`refuse_redirects`).
                found = {name.lower(): value for name, value in response.headers.items()}
                if not 200 <= response.status < 300:
                    return Answer(response.status, found)
                claimed = response.content_length
                if claimed is not None and claimed > max_bytes:
                    raise _too_large(max_bytes, f"Content-Length {claimed}")
                read = bytearray()
                async for chunk in response.content.iter_any():
                    read += chunk
                    if len(read) > max_bytes:
                        raise _too_large(max_bytes, f"more than {max_bytes} bytes")
                return Answer(response.status, found, bytes(read))
        except aiohttp.ClientPayloadError as error:
            raise OutboundError(
                Failure.INCOMPLETE,
                "the connection closed before the answer was whole",
                detail=type(error).__name__,
            ) from error
        except aiohttp.ClientError as error:
            if isinstance(error, TimeoutError):
                raise
            raise OutboundError(
                Failure.UNREACHABLE, f"no connection ({error})", detail=type(error).__name__
            ) from error


def _too_large(max_bytes: int, seen: str) -> OutboundError:
    return OutboundError(
        Failure.TOO_LARGE, f"the answer is larger than {max_bytes} bytes ({seen})", limit=max_bytes
    )


def _resolved(asked: yarl.URL, location: str) -> str:
    """`location` (a redirect's, maybe relative) as an absolute address against `asked` (the
    request's yarl URL); `location` itself when it does not parse."""
    from yarl import URL

    try:
        return str(asked.join(URL(location)))
    except ValueError:
        return location


def _shown(url: str) -> str:
    """`url` for a message: scheme, host, port and path, without user name, password, query or
    fragment (a query may carry what is not ours to log), printable, cut short."""
    try:
        parts = urlsplit(url)
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    except ValueError:
        shown = url
    shown = "".join(c for c in shown if c.isprintable())
    return shown[:120] + "…" if len(shown) > 120 else shown


def _where(url: str) -> str:
    """Where `url` points, for a message: its host and port, or the address itself (cut
    short) when it names none."""
    try:
        parts = urlsplit(url)
        where = parts.netloc.rpartition("@")[2] or parts.path
    except ValueError:
        where = url
    where = "".join(c for c in where if c.isprintable())
    return (where[:80] + "…" if len(where) > 80 else where) or "an address it did not name"
