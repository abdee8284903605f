"""The verdict posted back on the pull request as one comment, found again by a marker naming the
debate, so retries and resumed runs update it instead of adding another."""

from __future__ import annotations

from bot.hosts.answers import COMMENT, COMMENTS
from bot.hosts.clients import MAX_COMMENTS, HostClients
from bot.hosts.links import HostLink
from bot.outbound import (
    Joined,
)

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
