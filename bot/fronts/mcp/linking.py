"""A GitHub or GitLab link an agent gives `start_debate` as context: parsed and fetched by the
same code as a link posted in Slack (bot.hosts: the token only to the configured API address and
never along a redirect, every answer capped, one deadline per fetch), so an agent's link reads
what a person's would, and a link the bot cannot read is refused in words the agent can act on."""

from __future__ import annotations

from dataclasses import dataclass

from bot.hosts.clients import HostClients
from bot.hosts.fetch import fetch
from bot.hosts.links import LinkError, parse_link
from engine.models import ContextDocument

MAX_LINK_CHARS = 500
"""The longest link read (the length the store keeps of a debate's link)."""


class LinkRefusedError(Exception):
    """A link the server will not or cannot read; the message says why and how to fix it."""


@dataclass(frozen=True)
class Linked:
    """What a link gave: its address as stored with the debate, and its documents."""

    url: str
    documents: tuple[ContextDocument, ...]


async def read_link(hosts: HostClients, url: str) -> Linked:
    """The documents behind `url` (a file, or the ADR files and description of a pull or
    merge request); LinkRefusedError when it names neither on the configured hosts or the
    host refuses, fails or is too slow."""
    given = url.strip()
    config = hosts.config
    if len(given) > MAX_LINK_CHARS:
        raise LinkRefusedError(
            f"`link` is {len(given):,} characters; give a link of at most {MAX_LINK_CHARS}"
        )
    try:
        link = parse_link(given, config)
    except LinkError as error:
        raise LinkRefusedError(str(error)) from None
    if link is None:
        raise LinkRefusedError(
            f"`link` {given!r} is not a link to a file (…/blob/REF/PATH) or a pull or merge"
            f" request on the GitHub ({config.github_url}) or GitLab ({config.gitlab_url}) this"
            " server reads (DEBATEBOT_GITHUB_URL, DEBATEBOT_GITLAB_URL); pass the text as"
            " `context` instead"
        )
    try:
        fetched = await fetch(link, hosts)
    except LinkError as error:
        later = " (a later call may succeed)" if error.transient else ""
        raise LinkRefusedError(f"could not read `link` {given}: {error}{later}") from None
    return Linked(url=link.url, documents=tuple(fetched.documents))
