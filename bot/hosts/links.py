"""Which links point at a file or a pull (merge) request on the configured GitHub or GitLab,
parsed into checked parts (a link with `..` or an encoded `/` is refused before anything is
sent), whether a path looks like an ADR, and the code hosts' errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlparse

from bot.outbound import (
    OutboundError,
    decode_segment,
)

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
