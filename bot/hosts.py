"""ADRs linked from GitHub and GitLab: a file at a commit, or the ADR files a pull (merge)
request adds or changes plus its description, fetched through the host's API; and the verdict
posted back on the pull request as one comment, updated when a review decides.

Clients: PyGithub for GitHub (and GitHub Enterprise: `DEBATEBOT_GITHUB_URL`) and python-gitlab
for GitLab (and self-hosted GitLab: `DEBATEBOT_GITLAB_URL`). Both are the hosts' most used and
maintained Python clients, cover every call needed here (contents at a ref, pull request files,
issue and merge request notes), and raise errors that carry the HTTP status and headers, which
is what the answers below are made from. Both are synchronous: their calls run in a thread.

Failures are answered in the thread in words: a private repository the token cannot see (404
or 403), a rate limit (waited out when it resets within a minute, else "try after …"), a file
too large. The comment is found again by a marker naming the debate, so retries and resumed
runs update the one comment instead of adding another.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any, TypeVar
from urllib.parse import urlparse

from bot.adr import adr_title
from bot.slack.errors import SlackLayerError
from engine.models import ContextDocument

T = TypeVar("T")
MAX_FILE_BYTES = 512_000
MAX_FILES = 10
MAX_CHANGED_FILES = 3000
"""Of a huge merge request, the changed files read in search of its ADRs."""
RATE_LIMIT_WAIT_S = 60.0
ADR_PATH = re.compile(
    r"(^|/)(adrs?|decisions?|architecture[-_]?decisions?)/|(^|/)adr[-_]?\d+", re.I
)
DOC_SUFFIXES = (".md", ".markdown", ".adoc", ".rst", ".txt")
LINK = re.compile(r"https?://[^\s<>|]+")


class LinkError(SlackLayerError):
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
    """A parsed link: which host, which repository, and a file at a ref or a pull request."""

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
    that is not the usual place for the host (a proxy, a mirror, a test double)."""

    github_url: str = "https://github.com"
    github_token: str | None = None
    gitlab_url: str = "https://gitlab.com"
    gitlab_token: str | None = None
    timeout_s: float = 15.0
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
        """The address python-gitlab is given (it appends /api/v4)."""
        return (self.gitlab_api_url or self.gitlab_url).rstrip("/")


def find_link(text: str, config: HostConfig) -> HostLink | None:
    """The first GitHub or GitLab file or pull request link in `text`, if any."""
    for raw in LINK.findall(text):
        link = parse_link(raw.rstrip(">).,"), config)
        if link is not None:
            return link
    return None


def parse_link(url: str, config: HostConfig) -> HostLink | None:
    try:
        parsed = urlparse(url)
    except ValueError:
        # An unbalanced `[` reads as a broken IPv6 address: not a link to a host of ours.
        return None
    parts = [p for p in parsed.path.split("/") if p]
    host = parsed.netloc.lower()
    if host == urlparse(config.github_url).netloc.lower():
        if len(parts) >= 5 and parts[2] == "blob":
            return HostLink(
                "github", f"{parts[0]}/{parts[1]}", "file", parts[3], "/".join(parts[4:]), url=url
            )
        if len(parts) >= 4 and parts[2] == "pull" and parts[3].isdigit():
            return HostLink(
                "github", f"{parts[0]}/{parts[1]}", "pull", number=int(parts[3]), url=url
            )
    if host == urlparse(config.gitlab_url).netloc.lower() and "-" in parts:
        dash = parts.index("-")
        repo, rest = "/".join(parts[:dash]), parts[dash + 1 :]
        if len(rest) >= 3 and rest[0] == "blob":
            return HostLink("gitlab", repo, "file", rest[1], "/".join(rest[2:]), url=url)
        if len(rest) >= 2 and rest[0] == "merge_requests" and rest[1].isdigit():
            return HostLink("gitlab", repo, "pull", number=int(rest[1]), url=url)
    return None


def is_adr_path(path: str) -> bool:
    return path.lower().endswith(DOC_SUFFIXES) and ADR_PATH.search(path) is not None


@dataclass
class Fetched:
    """What a link gave: the ADR documents, and the pull request's description if any."""

    documents: list[ContextDocument]
    title: str


class HostClients:
    """The two clients, built on first use with the configured tokens and base URLs."""

    def __init__(self, config: HostConfig, sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.config = config
        self._github: Any = None
        self._gitlab: Any = None
        self._sleep = sleep

    def github(self) -> Any:
        if self._github is None:
            from github import Auth, Github

            token = self.config.github_token
            self._github = Github(
                auth=Auth.Token(token) if token else None,
                base_url=self.config.github_api,
                timeout=int(self.config.timeout_s),
                retry=None,
                seconds_between_requests=None,
                seconds_between_writes=None,
                lazy=True,
            )
        return self._github

    def gitlab(self) -> Any:
        if self._gitlab is None:
            import gitlab

            self._gitlab = gitlab.Gitlab(
                self.config.gitlab_api,
                private_token=self.config.gitlab_token,
                timeout=self.config.timeout_s,
            )
        return self._gitlab

    async def call(self, link: HostLink, work: Callable[[], T]) -> T:
        """Run a blocking client call in a thread; turn the host's refusals into LinkError,
        waiting out a rate limit that resets within RATE_LIMIT_WAIT_S (once)."""
        from github import GithubException
        from gitlab.exceptions import GitlabError
        from requests import RequestException

        for attempt in (1, 2):
            try:
                return await asyncio.to_thread(work)
            except (GithubException, GitlabError, RequestException) as error:
                wait_s, message, transient = self._refusal(link, error)
                if wait_s is not None and wait_s <= RATE_LIMIT_WAIT_S and attempt == 1:
                    await self._sleep(max(wait_s, 0.0))
                    continue
                raise LinkError(message, transient=transient) from error
        raise AssertionError("unreachable: the loop returns or raises")

    def _refusal(self, link: HostLink, error: Exception) -> tuple[float | None, str, bool]:
        """(seconds to wait before one more try, or None; what to tell people; whether a
        later try may succeed)."""
        status, headers = _status_and_headers(error)
        if status is None:
            name = type(error).__name__
            return None, f"I could not reach {_host_name(link)} ({name}); try later", True
        name = _host_name(link)
        variable = "DEBATEBOT_GITHUB_TOKEN" if link.host == "github" else "DEBATEBOT_GITLAB_TOKEN"
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
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


def _status_and_headers(error: Exception) -> tuple[int | None, dict[str, str] | None]:
    status = getattr(error, "status", None)
    if isinstance(status, int):
        return status, dict(getattr(error, "headers", None) or {})
    code = getattr(error, "response_code", None)
    if isinstance(code, int):
        response = getattr(error, "response", None)
        headers = dict(getattr(response, "headers", None) or {}) if response is not None else {}
        return code, headers
    return None, None


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


async def fetch(link: HostLink, clients: HostClients) -> Fetched:
    """The link's ADR documents (and a pull request's description), or LinkError."""
    if link.host == "github":
        return await _fetch_github(link, clients)
    return await _fetch_gitlab(link, clients)


async def _fetch_github(link: HostLink, clients: HostClients) -> Fetched:
    repo = clients.github().get_repo(link.repo)

    def file_at(path: str, ref: str) -> ContextDocument:
        content = repo.get_contents(path, ref=ref)
        if isinstance(content, list):
            raise LinkError(f"`{path}` is a folder; link the ADR file itself")
        _check_size(path, int(content.size or 0))
        return ContextDocument(
            title=f"{path} @ {ref[:12]}", text=_text_of(content.decoded_content, path)
        )

    if link.kind == "file":
        document = await clients.call(link, lambda: file_at(link.path, link.ref))
        return Fetched([document], adr_title(document.text))

    def pull() -> Fetched:
        request = repo.get_pull(link.number)
        head = request.head.sha
        paths = [
            f.filename
            for f in request.get_files()
            if f.status != "removed" and is_adr_path(f.filename)
        ][:MAX_FILES]
        if not paths:
            raise NoAdrError(
                f"pull request {link.label} adds or changes no ADR file (Markdown under an"
                " `adr/` or `decisions/` folder); link the ADR file instead"
            )
        documents = [file_at(path, head) for path in paths]
        if request.body:
            documents.append(
                ContextDocument(title=f"Pull request {link.label}: description", text=request.body)
            )
        return Fetched(documents, request.title or link.label)

    return await clients.call(link, pull)


async def _fetch_gitlab(link: HostLink, clients: HostClients) -> Fetched:
    def project() -> Any:
        return clients.gitlab().projects.get(link.repo, lazy=True)

    def file_at(path: str, ref: str) -> ContextDocument:
        found = project().files.get(file_path=path, ref=ref)
        _check_size(path, int(getattr(found, "size", 0) or 0))
        return ContextDocument(title=f"{path} @ {ref[:12]}", text=_text_of(found.decode(), path))

    if link.kind == "file":
        document = await clients.call(link, lambda: file_at(link.path, link.ref))
        return Fetched([document], adr_title(document.text))

    def changed_files(request: Any) -> list[dict[str, Any]]:
        """The merge request's changed files: `/diffs` (GitLab 15.7 and later, paged), or on
        an older GitLab without it the `/changes` that GitLab has since deprecated."""
        from gitlab.exceptions import GitlabHttpError

        diffs = f"{request.manager.path}/{request.iid}/diffs"
        try:
            pages = clients.gitlab().http_list(diffs, iterator=True, per_page=100)
            return list(islice(pages, MAX_CHANGED_FILES))
        except GitlabHttpError as error:
            if error.response_code != 404:
                raise
        return list(request.changes()["changes"])

    def merge_request() -> Fetched:
        request = project().mergerequests.get(link.number)
        head = request.sha
        paths = [
            change["new_path"]
            for change in changed_files(request)
            if not change.get("deleted_file") and is_adr_path(change["new_path"])
        ][:MAX_FILES]
        if not paths:
            raise NoAdrError(
                f"merge request {link.label} adds or changes no ADR file (Markdown under an"
                " `adr/` or `decisions/` folder); link the ADR file instead"
            )
        documents = [file_at(path, head) for path in paths]
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

        def github() -> str:
            issue = clients.github().get_repo(link.repo).get_issue(link.number)
            for comment in issue.get_comments():
                if marker in (comment.body or ""):
                    if comment.body != text:
                        comment.edit(text)
                    return str(comment.id)
            return str(issue.create_comment(text).id)

        return await clients.call(link, github)

    def gitlab() -> str:
        notes = (
            clients.gitlab()
            .projects.get(link.repo, lazy=True)
            .mergerequests.get(link.number, lazy=True)
            .notes
        )
        for note in notes.list(iterator=True):
            if marker in (note.body or ""):
                if note.body != text:
                    note.body = text
                    note.save()
                return str(note.id)
        return str(notes.create({"body": text}).id)

    return await clients.call(link, gitlab)
