"""Files people upload to a watched channel: an ADR as a Markdown file or a snippet, read with
the bot token (`files.info`, then `url_private_download`; the app needs the `files:read` scope).

The download goes through `bot.outbound`: the token is sent only to Slack's file host
(`files_origin`), never along a redirect, and the file is read whole within a deadline or not at
all. A file too large (as files.info says, or as it streams), not text, cut short, too slow, or
that Slack will not hand over is refused with the reason and what to do instead, in the thread;
nothing is debated from part of a file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound import Failure, Origin, Outbound, OutboundError
from bot.slackweb.errors import SlackWebError
from bot.slackweb.poster import SLACK_FAILURES, classify
from engine.models import ContextDocument

MAX_UPLOAD_BYTES = 512_000
"""An ADR is a few kilobytes; half a megabyte leaves room for appendices, not for a data dump."""
TEXT_NAMES = (".md", ".markdown", ".mdown", ".txt", ".adoc", ".rst")
TEXT_TYPES = frozenset({"markdown", "text", "post", "asciidoc", "rst"})
ATTEMPTS = 3
SLACK_FILES = "https://files.slack.com"


def files_origin(api_url: str, files_url: str | None = None) -> Origin:
    """Where the bot token may fetch files from: `files_url` when set, Slack's file host when
    the Web API is Slack's own, else the Web API's own origin (a proxy, the tests' emulator)."""
    if files_url:
        return Origin.of(files_url)
    api = Origin.of(api_url)
    if api.host == "slack.com":
        return Origin.of(SLACK_FILES)
    return Origin(api.scheme, api.host, api.port)


@dataclass(frozen=True)
class Uploads:
    """How uploads are read: the address Slack serves files from when it is not derived from
    the Web API's (`DEBATEBOT_SLACK_FILES_URL`), each download try's deadline, and the guarded
    requests on the process's pooled Slack session (`http`; one of their own when None)."""

    files_url: str | None = None
    timeout_s: float = 10.0
    http: Outbound | None = None


class UploadRefusedError(SlackWebError):
    """An upload the bot will not debate; the message says why and what to do instead."""


def is_document_upload(file: dict[str, Any]) -> bool:
    """A Markdown or text file, or a snippet: what an ADR upload looks like."""
    name = str(file.get("name") or "").lower()
    return (
        name.endswith(TEXT_NAMES)
        or file.get("filetype") in TEXT_TYPES
        or file.get("mode") == "snippet"
    )


async def read_upload(
    client: AsyncWebClient,
    file_id: str,
    *,
    max_bytes: int = MAX_UPLOAD_BYTES,
    timeout_s: float = 10,
    files_url: str | None = None,
    http: Outbound | None = None,
) -> ContextDocument:
    """The uploaded file as a context document, read whole, through `http` (a session of its
    own when None); UploadRefusedError says why it cannot be."""
    info = await _file_info(client, file_id)
    name = str(info.get("title") or info.get("name") or file_id)
    claimed = info.get("size")
    size = claimed if isinstance(claimed, int) and claimed > 0 else 0
    if size > max_bytes:
        raise _too_large(name, size, max_bytes)
    url = info.get("url_private_download") or info.get("url_private")
    if not url:
        raise UploadRefusedError(f"Slack gave no download address for `{name}`; upload it again")
    origin = files_origin(client.base_url, files_url)
    token = str(client.token)
    if http is not None:
        data = await _download(http, origin, str(url), token, name, max_bytes, timeout_s)
    else:
        async with Outbound(timeout_s=timeout_s) as own:
            data = await _download(own, origin, str(url), token, name, max_bytes, timeout_s)
    if len(data) < size:
        raise UploadRefusedError(
            f"Slack sent {len(data):,} of the {size:,} bytes of `{name}`, so I debated none of"
            " it: upload it again"
        )
    if b"\x00" in data:
        raise UploadRefusedError(
            f"`{name}` is a binary file, not text: upload the ADR as Markdown (.md) or paste it"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UploadRefusedError(
            f"`{name}` is not UTF-8 text: save it as UTF-8 Markdown and upload it again"
        ) from None
    if not text.strip():
        raise UploadRefusedError(f"`{name}` is empty")
    return ContextDocument(title=name, text=text)


def _too_large(name: str, size: int | None, max_bytes: int) -> UploadRefusedError:
    told = f"is {size // 1024:,} KB" if size else f"is larger than {max_bytes // 1024:,} KB"
    return UploadRefusedError(
        f"`{name}` {told} and I read at most {max_bytes // 1024:,} KB: post the ADR's text, or"
        " link the file on GitHub or GitLab"
    )


async def _file_info(client: AsyncWebClient, file_id: str) -> dict[str, Any]:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = await client.files_info(file=file_id)
        except SLACK_FAILURES as raised:
            error = classify(raised, "files.info", file_id)
            if error.retryable and attempt < ATTEMPTS:
                await asyncio.sleep(error.retry_after_s or attempt)
                continue
            if error.code == "missing_scope":
                raise UploadRefusedError(
                    "I may not read uploaded files: reinstall the app with the `files:read` scope"
                ) from raised
            raise UploadRefusedError(
                f"Slack would not give me the file ({error.code}); upload it again later"
            ) from raised
        return dict(response.get("file") or {})
    raise AssertionError("unreachable: the loop returns or raises")


async def _download(
    http: Outbound,
    origin: Origin,
    url: str,
    token: str,
    name: str,
    max_bytes: int,
    timeout_s: float,
) -> bytes:
    """The file, whole, in at most ATTEMPTS tries (a 5xx, a failed connection, a download cut
    short or past its deadline is tried again)."""
    credential = {"Authorization": f"Bearer {token}"}
    for attempt in range(1, ATTEMPTS + 1):
        try:
            answer = await http.send(origin, "GET", url, credential=credential, max_bytes=max_bytes)
        except OutboundError as error:
            if error.transient and attempt < ATTEMPTS:
                await asyncio.sleep(attempt)
                continue
            raise _refusal(error, origin, name, max_bytes, timeout_s) from error
        if answer.status >= 500 and attempt < ATTEMPTS:
            await asyncio.sleep(attempt)
            continue
        if answer.status != 200:
            raise UploadRefusedError(
                f"Slack answered HTTP {answer.status} for `{name}`; upload it again later"
            )
        if answer.content_type == "text/html":
            # Slack's answer to a token that may not read files is its sign-in page.
            raise UploadRefusedError(
                f"Slack sent its sign-in page instead of `{name}`: reinstall the app with"
                " the `files:read` scope"
            )
        return answer.body
    raise AssertionError("unreachable: the loop returns or raises")


def _refusal(
    error: OutboundError, origin: Origin, name: str, max_bytes: int, timeout_s: float
) -> UploadRefusedError:
    """What people are told when a download gave no whole file (or was never sent)."""
    if error.failure is Failure.OFF_ORIGIN:
        return UploadRefusedError(
            f"Slack gave a download address for `{name}` on another host ({error.target}); the"
            f" bot sends its token only to {origin.address}, so the file was not read. Paste"
            " the ADR's text, or set DEBATEBOT_SLACK_FILES_URL if your Slack serves files from"
            " there"
        )
    if error.failure is Failure.TOO_LARGE:
        return _too_large(name, None, max_bytes)
    if error.failure is Failure.REDIRECT:
        return UploadRefusedError(
            f"Slack answered the download of `{name}` with a redirect to {error.target}; the bot"
            " never follows a redirect with its token, so the file was not read. Paste the"
            " ADR's text, or upload it again"
        )
    if error.failure is Failure.DEADLINE:
        return UploadRefusedError(
            f"I could not download `{name}` from Slack: it did not arrive whole within"
            f" {timeout_s:g} s in {ATTEMPTS} tries; upload it again later"
        )
    if error.failure is Failure.INCOMPLETE:
        return UploadRefusedError(
            f"I could not download `{name}` from Slack: the download was cut off before the"
            f" whole file arrived, in {ATTEMPTS} tries; upload it again later"
        )
    return UploadRefusedError(
        f"I could not download `{name}` from Slack ({error.detail or error.failure}); upload it"
        " again later"
    )
