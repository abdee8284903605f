"""Files people upload to a watched channel: an ADR as a Markdown file or a snippet, read with
the bot token (`files.info`, then `url_private_download`; the app needs the `files:read` scope).

A file too large, not text, or that Slack will not hand over is refused with the reason and
what to do instead, in the thread; nothing is debated from half a file.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.errors import SlackLayerError
from bot.slack.poster import SLACK_FAILURES, classify
from engine.models import ContextDocument

MAX_UPLOAD_BYTES = 512_000
"""An ADR is a few kilobytes; half a megabyte leaves room for appendices, not for a data dump."""
TEXT_NAMES = (".md", ".markdown", ".mdown", ".txt", ".adoc", ".rst")
TEXT_TYPES = frozenset({"markdown", "text", "post", "asciidoc", "rst"})
ATTEMPTS = 3


class UploadRefusedError(SlackLayerError):
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
) -> ContextDocument:
    """The uploaded file as a context document; UploadRefusedError says why it cannot be."""
    info = await _file_info(client, file_id)
    name = str(info.get("title") or info.get("name") or file_id)
    size = int(info.get("size") or 0)
    if size > max_bytes:
        raise UploadRefusedError(
            f"`{name}` is {size // 1024:,} KB and I read at most {max_bytes // 1024:,} KB:"
            " post the ADR's text, or link the file on GitHub or GitLab"
        )
    url = info.get("url_private_download") or info.get("url_private")
    if not url:
        raise UploadRefusedError(f"Slack gave no download address for `{name}`; upload it again")
    data = await _download(str(url), str(client.token), name, max_bytes, timeout_s)
    if len(data) > max_bytes:
        raise UploadRefusedError(
            f"`{name}` is larger than {max_bytes // 1024:,} KB: post the ADR's text, or link the"
            " file on GitHub or GitLab"
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


async def _download(url: str, token: str, name: str, max_bytes: int, timeout_s: float) -> bytes:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    headers = {"Authorization": f"Bearer {token}"}
    for attempt in range(1, ATTEMPTS + 1):
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status >= 500 and attempt < ATTEMPTS:
                    await asyncio.sleep(attempt)
                    continue
                if response.status != 200:
                    raise UploadRefusedError(
                        f"Slack answered HTTP {response.status} for `{name}`; upload it again later"
                    )
                if response.content_type == "text/html":
                    # Slack's answer to a token that may not read files is its sign-in page.
                    raise UploadRefusedError(
                        f"Slack sent its sign-in page instead of `{name}`: reinstall the app with"
                        " the `files:read` scope"
                    )
                return await response.content.read(max_bytes + 1)
        except (aiohttp.ClientError, TimeoutError) as error:
            if attempt < ATTEMPTS:
                await asyncio.sleep(attempt)
                continue
            raise UploadRefusedError(
                f"I could not download `{name}` from Slack ({type(error).__name__}); upload it"
                " again later"
            ) from error
    raise AssertionError("unreachable: the loop returns or raises")
