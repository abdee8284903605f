"""An ADR linked from GitHub or GitLab, fetched: a file at a commit, or the ADR files a pull
(merge) request adds or changes plus its description."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from bot.adr import adr_title
from bot.hosts.answers import (
    GITHUB_CONTENT,
    GITHUB_FILES,
    GITHUB_PULL,
    GITLAB_CHANGES,
    GITLAB_DIFFS,
    GITLAB_FILE,
    GITLAB_MERGE_REQUEST,
    GitLabChange,
)
from bot.hosts.clients import HostAnswerError, HostClients
from bot.hosts.links import HostLink, LinkError, NoAdrError, is_adr_path
from bot.outbound import (
    Failure,
    Joined,
    OutboundError,
)
from engine.models import ContextDocument

T = TypeVar("T")
MAX_FILE_BYTES = 512_000


MAX_FILES = 10


MAX_CHANGED_FILES = 3000
"""Of a huge merge request, the changed files read in search of its ADRs."""


FILE_ANSWER_BYTES = MAX_FILE_BYTES * 3 // 2 + 64_000
"""The largest answer for a file the bot reads: its base64 (4/3 of it, with GitHub's escaped
line breaks) and the answer's other fields."""


@dataclass
class Fetched:
    """What a link gave: the ADR documents, and the pull request's description if any."""

    documents: list[ContextDocument]
    title: str


def check_size(name: str, size: int) -> None:
    if size > MAX_FILE_BYTES:
        raise LinkError(
            f"`{name}` is {size // 1024:,} KB and I read at most {MAX_FILE_BYTES // 1024:,} KB"
        )


def text_of(raw: bytes, name: str) -> str:
    check_size(name, len(raw))
    if b"\x00" in raw:
        raise LinkError(f"`{name}` is a binary file, not an ADR")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LinkError(f"`{name}` is not UTF-8 text") from None


def decoded(name: str, encoding: str, content: str) -> bytes:
    """A file's bytes from the API's base64."""
    if encoding != "base64":
        raise LinkError(f"`{name}` came in an encoding I do not read ({encoding or 'none'})")
    try:
        return base64.b64decode(content)
    except (binascii.Error, ValueError):
        raise LinkError(f"`{name}` came as damaged base64; try again later") from None


def document(path: str, ref: str, *, size: int, encoding: str, content: str) -> ContextDocument:
    """The file at `path` in `ref` as a debate reads it, from a host's answer: its stated size
    checked before the base64 is decoded, and the text checked after."""
    check_size(path, size)
    return ContextDocument(
        title=f"{path} @ {ref[:12]}", text=text_of(decoded(path, encoding, content), path)
    )


async def file_answer(path: str, read: Callable[[], Awaitable[T]]) -> T:
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


async def _one_file(
    link: HostLink, clients: HostClients, file_at: Callable[[str, str], Awaitable[ContextDocument]]
) -> Fetched:
    """A link to one file: that file, titled by its ADR heading."""
    read = await clients.call(link, lambda: file_at(link.path, link.ref))
    return Fetched([read], adr_title(read.text))


async def _fetch_github(link: HostLink, clients: HostClients) -> Fetched:
    owner, name = link.repo.split("/", 1)
    repo = ("repos", owner, name)

    async def file_at(path: str, ref: str) -> ContextDocument:
        found = await file_answer(
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
        return document(
            path, ref, size=content.size, encoding=content.encoding, content=content.content
        )

    if link.kind == "file":
        return await _one_file(link, clients, file_at)

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
        found = await file_answer(
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
        return document(path, ref, size=found.size, encoding=found.encoding, content=found.content)

    if link.kind == "file":
        return await _one_file(link, clients, file_at)

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
