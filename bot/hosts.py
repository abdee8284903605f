"""ADRs linked from GitHub and GitLab: a file at a commit, or the ADR files a pull (merge)
request adds or changes plus its description, fetched through the host's API; and the verdict
posted back on the pull request as one comment, updated when a review decides.

The REST calls are made here, on `bot.outbound`: GitHub's v3 API (github.com, GitHub Enterprise:
`DEBATEBOT_GITHUB_URL`) and GitLab's v4 API (gitlab.com, self-hosted: `DEBATEBOT_GITLAB_URL`),
the same endpoints and request shapes as the hosts' own Python clients. The token goes only to
the configured API address, never along a redirect; every path is built from checked segments
(a link with `..` or an encoded `/` is refused before anything is sent); lists are read page by
page by number (never a next-page address the host names), up to a bound; every answer is
capped; and each fetch or comment has one deadline (`DEBATEBOT_HOST_TIMEOUT_S`).

Failures are answered in the thread in words: a private repository the token cannot see (404
or 403), a rate limit (waited out when it resets within a minute, else "try after …"), a file
too large, a redirect, an answer too large or cut short, a host too slow. The comment is found
again by a marker naming the debate, so retries and resumed runs update the one comment instead
of adding another.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel, TypeAdapter, ValidationError

from bot.adr import adr_title
from bot.outbound import (
    Failure,
    Joined,
    Origin,
    Outbound,
    OutboundError,
    decode_segment,
    size_text,
)
from engine.models import ContextDocument

T = TypeVar("T")
MAX_FILE_BYTES = 512_000
MAX_FILES = 10
MAX_CHANGED_FILES = 3000
"""Of a huge merge request, the changed files read in search of its ADRs."""
MAX_COMMENTS = 3000
"""Of a pull request's comments, the ones searched for the bot's own."""
PER_PAGE = 100
FILE_ANSWER_BYTES = MAX_FILE_BYTES * 3 // 2 + 64_000
"""The largest answer for a file the bot reads: its base64 (4/3 of it, with GitHub's escaped
line breaks) and the answer's other fields."""
ANSWER_BYTES = 8 * 1024 * 1024
"""The largest other answer read: a page of 100 changed files with their diffs, a merge
request's description (GitLab allows a megabyte)."""
RATE_LIMIT_WAIT_S = 60.0
ADR_PATH = re.compile(
    r"(^|/)(adrs?|decisions?|architecture[-_]?decisions?)/|(^|/)adr[-_]?\d+", re.I
)
DOC_SUFFIXES = (".md", ".markdown", ".adoc", ".rst", ".txt")
LINK = re.compile(r"https?://[^\s<>|]+")


class HostError(Exception):
    """Base of the code hosts' errors."""


class LinkError(HostError):
    """A linked ADR that cannot be fetched (or a comment not posted); the message says why and
    what to do. `transient`: the host was unreachable, failing or rate-limited, so the same
    call may succeed later; otherwise it refused (no access, a bad link) and will again."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class NoAdrError(LinkError):
    """The pull request adds or changes no ADR file: a link posted in passing, not a request."""


@dataclass(frozen=True)
class HostLink:
    """A parsed link: which host, which repository, and a file at a ref or a pull request.
    Every part is decoded text whose path segments passed `bot.outbound.check_segment`."""

    host: str
    """github or gitlab"""
    repo: str
    kind: str
    """file or pull"""
    ref: str = ""
    path: str = ""
    number: int = 0
    url: str = ""

    @property
    def label(self) -> str:
        if self.kind == "file":
            return f"{self.repo}/{self.path}@{self.ref}"
        return (
            f"{self.repo}#{self.number}" if self.host == "github" else f"{self.repo}!{self.number}"
        )


@dataclass(frozen=True)
class HostConfig:
    """`*_url` is the address people's links point at; `*_api_url` where the API answers, when
    that is not the usual place for the host (a proxy, a mirror, a test double). `timeout_s`
    bounds one fetch or one comment sync, all its requests together."""

    github_url: str = "https://github.com"
    github_token: str | None = None
    gitlab_url: str = "https://gitlab.com"
    gitlab_token: str | None = None
    timeout_s: float = 30.0
    github_api_url: str | None = None
    gitlab_api_url: str | None = None

    @property
    def github_api(self) -> str:
        """The REST API's root: api.github.com for github.com, api.NAME.ghe.com for GitHub
        Enterprise Cloud with data residency, ADDRESS/api/v3 for GitHub Enterprise Server."""
        if self.github_api_url:
            return self.github_api_url.rstrip("/")
        base = self.github_url.rstrip("/")
        host = urlparse(base).netloc.lower()
        if host == "github.com":
            return "https://api.github.com"
        if host.endswith(".ghe.com"):
            return f"https://api.{host}"
        return f"{base}/api/v3"

    @property
    def gitlab_api(self) -> str:
        """GitLab's address before `/api/v4`."""
        return (self.gitlab_api_url or self.gitlab_url).rstrip("/")


def find_link(text: str, config: HostConfig) -> HostLink | None:
    """The first GitHub or GitLab file or pull request link in `text`, if any; LinkError for
    a link to the configured hosts whose path could reach outside the repository."""
    for raw in LINK.findall(text):
        link = parse_link(raw.rstrip(">).,"), config)
        if link is not None:
            return link
    return None


def parse_link(url: str, config: HostConfig) -> HostLink | None:
    """The file or pull request `url` names on the configured GitHub or GitLab, or None when it
    names neither. Each path segment is percent-decoded and checked: a link holding `.`, `..`,
    an encoded `/`, a `\\` or a control character raises LinkError (no request is made)."""
    try:
        parsed = urlparse(url)
    except ValueError:
        # An unbalanced `[` reads as a broken IPv6 address: not a link to a host of ours.
        return None
    host = parsed.netloc.lower()
    if host == urlparse(config.github_url).netloc.lower():
        service = "GitHub"
    elif host == urlparse(config.gitlab_url).netloc.lower():
        service = "GitLab"
    else:
        return None
    raw = parsed.path.split("/")[1:]
    if raw and raw[-1] == "":
        raw.pop()  # a trailing slash
    try:
        parts = [decode_segment(p) for p in raw]
    except OutboundError as error:
        raise LinkError(
            f"I did not fetch {url}: {error}, which could reach outside the repository on"
            f" {service}. Copy the link from {service} again"
        ) from error
    if service == "GitHub":
        if len(parts) >= 5 and parts[2] == "blob":
            return HostLink(
                "github", f"{parts[0]}/{parts[1]}", "file", parts[3], "/".join(parts[4:]), url=url
            )
        if len(parts) >= 4 and parts[2] == "pull" and _number(parts[3]):
            return HostLink(
                "github", f"{parts[0]}/{parts[1]}", "pull", number=int(parts[3]), url=url
            )
        return None
    if "-" in parts:
        dash = parts.index("-")
        repo, rest = "/".join(parts[:dash]), parts[dash + 1 :]
        if repo and len(rest) >= 3 and rest[0] == "blob":
            return HostLink("gitlab", repo, "file", rest[1], "/".join(rest[2:]), url=url)
        if repo and len(rest) >= 2 and rest[0] == "merge_requests" and _number(rest[1]):
            return HostLink("gitlab", repo, "pull", number=int(rest[1]), url=url)
    return None


def _number(part: str) -> bool:
    """ASCII digits: `str.isdigit` also takes "²", which `int` refuses."""
    return part.isascii() and part.isdigit()


def is_adr_path(path: str) -> bool:
    return path.lower().endswith(DOC_SUFFIXES) and ADR_PATH.search(path) is not None


@dataclass
class Fetched:
    """What a link gave: the ADR documents, and the pull request's description if any."""

    documents: list[ContextDocument]
    title: str


# --- the answers the bot reads (fields it does not use are ignored) ----------------------------


class _Sha(BaseModel):
    sha: str


class GitHubContent(BaseModel):
    type: str = "file"
    encoding: str = ""
    content: str = ""
    size: int = 0


class GitHubPull(BaseModel):
    title: str | None = None
    body: str | None = None
    head: _Sha


class GitHubFile(BaseModel):
    filename: str
    status: str = ""


class GitLabFile(BaseModel):
    encoding: str = "base64"
    content: str = ""
    size: int = 0


class GitLabMergeRequest(BaseModel):
    title: str | None = None
    description: str | None = None
    sha: str


class GitLabChange(BaseModel):
    new_path: str
    deleted_file: bool = False


class GitLabChanges(BaseModel):
    changes: list[GitLabChange]


class Comment(BaseModel):
    """A GitHub issue comment or a GitLab note."""

    id: int
    body: str | None = None


PAGE = TypeAdapter(list[dict[str, Any]])
GITHUB_CONTENT = TypeAdapter(GitHubContent)
GITHUB_PULL = TypeAdapter(GitHubPull)
GITHUB_FILES = TypeAdapter(list[GitHubFile])
GITLAB_FILE = TypeAdapter(GitLabFile)
GITLAB_MERGE_REQUEST = TypeAdapter(GitLabMergeRequest)
GITLAB_CHANGES = TypeAdapter(GitLabChanges)
GITLAB_DIFFS = TypeAdapter(list[GitLabChange])
COMMENT = TypeAdapter(Comment)
COMMENTS = TypeAdapter(list[Comment])


class HostAnswerError(Exception):
    """The host answered with an error status (4xx, 5xx); `HostClients.call` words it."""

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = dict(headers)


class HostClients:
    """Both hosts' APIs through one guarded HTTP session (`bot.outbound`), opened on first use
    and closed by `aclose()` (its owner, `DebateServices`, closes it on shutdown)."""

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
            self._http = Outbound(timeout_s=self.config.timeout_s)
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
        name = _host_name(link)
        return LinkError(
            f"{name} answered `{link.label}` with something that is not its API's answer; check"
            f" {_api_setting(link)}"
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
            f"{_host_name(link)} did not answer within {self.config.timeout_s:g} s; try again later"
        )

    def _failure(self, link: HostLink, error: OutboundError) -> str:
        """What people are told when no whole answer came."""
        name = _host_name(link)
        if error.failure is Failure.REDIRECT:
            return (
                f"{name} answered with a redirect to {error.target}; the bot never follows a"
                f" redirect with its token. If the API moved, set {_api_setting(link)} to its"
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
                f" {error.target} is elsewhere. Check {_api_setting(link)}"
            )
        return f"I could not reach {name} ({error.detail}); try later"

    def _refusal(
        self, link: HostLink, status: int, headers: Mapping[str, str]
    ) -> tuple[float | None, str, bool]:
        """(seconds to wait before one more try, or None; what to tell people; whether a
        later try may succeed)."""
        name = _host_name(link)
        variable = "DEBATEBOT_GITHUB_TOKEN" if link.host == "github" else "DEBATEBOT_GITLAB_TOKEN"
        lowered = {k.lower(): v for k, v in headers.items()}
        reset = _reset_in(lowered)
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


def _host_name(link: HostLink) -> str:
    return "GitHub" if link.host == "github" else "GitLab"


def _api_setting(link: HostLink) -> str:
    return "DEBATEBOT_GITHUB_API_URL" if link.host == "github" else "DEBATEBOT_GITLAB_API_URL"


def _reset_in(headers: dict[str, str]) -> float | None:
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


def _check_size(name: str, size: int) -> None:
    if size > MAX_FILE_BYTES:
        raise LinkError(
            f"`{name}` is {size // 1024:,} KB and I read at most {MAX_FILE_BYTES // 1024:,} KB"
        )


def _text_of(raw: bytes, name: str) -> str:
    _check_size(name, len(raw))
    if b"\x00" in raw:
        raise LinkError(f"`{name}` is a binary file, not an ADR")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LinkError(f"`{name}` is not UTF-8 text") from None


def _decoded(name: str, encoding: str, content: str) -> bytes:
    """A file's bytes from the API's base64."""
    if encoding != "base64":
        raise LinkError(f"`{name}` came in an encoding I do not read ({encoding or 'none'})")
    try:
        return base64.b64decode(content)
    except (binascii.Error, ValueError):
        raise LinkError(f"`{name}` came as damaged base64; try again later") from None


async def _file_answer(path: str, read: Callable[[], Awaitable[T]]) -> T:
    """A file's answer; one larger than the bot reads is told as the file being too large."""
    try:
        return await read()
    except OutboundError as error:
        if error.failure is not Failure.TOO_LARGE:
            raise
        raise LinkError(
            f"`{path}` is larger than {MAX_FILE_BYTES // 1024:,} KB and I read at most"
            f" {MAX_FILE_BYTES // 1024:,} KB"
        ) from error


async def fetch(link: HostLink, clients: HostClients) -> Fetched:
    """The link's ADR documents (and a pull request's description), or LinkError."""
    if link.host == "github":
        return await _fetch_github(link, clients)
    return await _fetch_gitlab(link, clients)


async def _fetch_github(link: HostLink, clients: HostClients) -> Fetched:
    owner, name = link.repo.split("/", 1)
    repo = ("repos", owner, name)

    async def file_at(path: str, ref: str) -> ContextDocument:
        found = await _file_answer(
            path,
            lambda: clients.request(
                link,
                "GET",
                *repo,
                "contents",
                *path.split("/"),
                query={"ref": ref},
                max_bytes=FILE_ANSWER_BYTES,
            ),
        )
        if isinstance(found, list):
            raise LinkError(f"`{path}` is a folder; link the ADR file itself")
        content = clients.shaped(link, GITHUB_CONTENT, found)
        if content.type != "file":
            raise LinkError(f"`{path}` is a {content.type}, not a file; link the ADR file itself")
        _check_size(path, content.size)
        raw = _decoded(path, content.encoding, content.content)
        return ContextDocument(title=f"{path} @ {ref[:12]}", text=_text_of(raw, path))

    if link.kind == "file":
        document = await clients.call(link, lambda: file_at(link.path, link.ref))
        return Fetched([document], adr_title(document.text))

    async def pull() -> Fetched:
        request = await clients.read(link, GITHUB_PULL, *repo, "pulls", str(link.number))
        listed = await clients.pages(
            link, *repo, "pulls", str(link.number), "files", limit=MAX_CHANGED_FILES
        )
        files = clients.shaped(link, GITHUB_FILES, listed)
        paths = [f.filename for f in files if f.status != "removed" and is_adr_path(f.filename)]
        if not paths:
            raise NoAdrError(
                f"pull request {link.label} adds or changes no ADR file (Markdown under an"
                " `adr/` or `decisions/` folder); link the ADR file instead"
            )
        documents = [await file_at(path, request.head.sha) for path in paths[:MAX_FILES]]
        if request.body:
            documents.append(
                ContextDocument(title=f"Pull request {link.label}: description", text=request.body)
            )
        return Fetched(documents, request.title or link.label)

    return await clients.call(link, pull)


async def _fetch_gitlab(link: HostLink, clients: HostClients) -> Fetched:
    project = ("projects", Joined(link.repo))

    async def file_at(path: str, ref: str) -> ContextDocument:
        found = await _file_answer(
            path,
            lambda: clients.read(
                link,
                GITLAB_FILE,
                *project,
                "repository",
                "files",
                Joined(path),
                query={"ref": ref},
                max_bytes=FILE_ANSWER_BYTES,
            ),
        )
        _check_size(path, found.size)
        raw = _decoded(path, found.encoding, found.content)
        return ContextDocument(title=f"{path} @ {ref[:12]}", text=_text_of(raw, path))

    if link.kind == "file":
        document = await clients.call(link, lambda: file_at(link.path, link.ref))
        return Fetched([document], adr_title(document.text))

    request_path = (*project, "merge_requests", str(link.number))

    async def changed_files() -> list[GitLabChange]:
        """The merge request's changed files: `/diffs` (GitLab 15.7 and later, paged), or on
        an older GitLab without it the `/changes` that GitLab has since deprecated."""
        try:
            listed = await clients.pages(link, *request_path, "diffs", limit=MAX_CHANGED_FILES)
            return clients.shaped(link, GITLAB_DIFFS, listed)
        except HostAnswerError as error:
            if error.status != 404:
                raise
        changes = await clients.read(link, GITLAB_CHANGES, *request_path, "changes")
        return changes.changes[:MAX_CHANGED_FILES]

    async def merge_request() -> Fetched:
        request = await clients.read(link, GITLAB_MERGE_REQUEST, *request_path)
        paths = [
            change.new_path
            for change in await changed_files()
            if not change.deleted_file and is_adr_path(change.new_path)
        ]
        if not paths:
            raise NoAdrError(
                f"merge request {link.label} adds or changes no ADR file (Markdown under an"
                " `adr/` or `decisions/` folder); link the ADR file instead"
            )
        documents = [await file_at(path, request.sha) for path in paths[:MAX_FILES]]
        if request.description:
            documents.append(
                ContextDocument(
                    title=f"Merge request {link.label}: description", text=request.description
                )
            )
        return Fetched(documents, request.title or link.label)

    return await clients.call(link, merge_request)


MARKER = "<!-- debatebot:debate-{debate_id} -->"


async def upsert_comment(link: HostLink, clients: HostClients, *, debate_id: int, body: str) -> str:
    """Post the verdict on the pull request once, or update the comment posted before (found by
    its marker, so retries and resumed runs never add a second one); returns its id."""
    marker = MARKER.format(debate_id=debate_id)
    text = f"{body}\n\n{marker}"
    if link.host == "github":
        owner, name = link.repo.split("/", 1)
        issue = ("repos", owner, name, "issues")
        listing: tuple[str | Joined, ...] = (*issue, str(link.number), "comments")

        def edited(comment_id: int) -> tuple[str, tuple[str | Joined, ...]]:
            return "PATCH", (*issue, "comments", str(comment_id))
    else:
        request = ("projects", Joined(link.repo), "merge_requests", str(link.number))
        listing = (*request, "notes")

        def edited(comment_id: int) -> tuple[str, tuple[str | Joined, ...]]:
            return "PUT", (*listing, str(comment_id))

    async def upsert() -> str:
        found = await clients.pages(link, *listing, limit=MAX_COMMENTS)
        for comment in clients.shaped(link, COMMENTS, found):
            if marker in (comment.body or ""):
                if comment.body != text:
                    method, path = edited(comment.id)
                    await clients.request(link, method, *path, body={"body": text})
                return str(comment.id)
        created = await clients.request(link, "POST", *listing, body={"body": text})
        return str(clients.shaped(link, COMMENT, created).id)

    return await clients.call(link, upsert)
