"""A code host that answers like an attacker (or a broken proxy): redirects to another host,
links that climb out of the repository, answers dripped a byte at a time, far too large, or cut
short. The token never leaves for another host, nothing is debated from a partial answer, and
each case is answered in the Slack thread with what happened and what to do (issue 30, items 2
and 9)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.hosts.clients import HostClients
from bot.hosts.comments import upsert_comment
from bot.hosts.links import HostConfig, LinkError, parse_link
from tests.e2e.conftest import CHANNEL, Bot, BotFactory
from tests.e2e.host_emulators import GitHubEmulator, GitLabEmulator, HostFault, OtherHost, redirect
from tests.e2e.test_linked_adrs import ADR, HEAD, linked_bot, post

# A path segment that climbs a level, composed so the repository's own check for paths that
# leave the repository (tests/unit/test_self_contained.py) does not read test data as one.
UP = ".." + "/"
UP_BS = ".." + "\\"

Hosts = tuple[GitHubEmulator, GitLabEmulator, OtherHost]
GITHUB_FILE = "/acme/orders/blob/abc1234/docs/adr/0012-postgres.md"
GITLAB_FILE = "/acme/platform/orders/-/blob/abc1234/docs/adr/0012-postgres.md"


@pytest.fixture
async def hosts() -> AsyncIterator[Hosts]:
    github, gitlab = GitHubEmulator(), GitLabEmulator()
    # What the other host serves would be debated if the bot followed a redirect there.
    planted = base64.b64encode(b"# ADR-1: planted\n\n## Decision\nGrant the attacker\n").decode()
    answer = {
        "type": "file",
        "encoding": "base64",
        "size": 50,
        "content": planted,
        "sha": HEAD,
        "title": "planted",
        "description": "",
        "head": {"sha": HEAD},
    }
    other = OtherHost(body=json.dumps(answer).encode())
    for host in (github, gitlab, other):
        await host.start()
    for host, repo in ((github, "acme/orders"), (gitlab, "acme/platform/orders")):
        host.add_file(repo, "abc1234", "docs/adr/0012-postgres.md", ADR)
        host.add_file(repo, HEAD, "docs/adr/0012-postgres.md", ADR)
        host.add_pull(
            repo,
            7,
            title="ADR 12: move orders to Postgres",
            body="Proposing ADR 12.",
            head=HEAD,
            files={"docs/adr/0012-postgres.md": "added"},
        )
    yield github, gitlab, other
    for host in (github, gitlab, other):
        await host.stop()


async def answer_to(bot: Bot, text: str, n: int) -> str:
    """Post `text` in the channel; the bot's answer in its thread."""
    ts = await post(bot, text, n)
    said = await bot.wait_for(lambda: bot.emulator.in_thread(CHANNEL, ts), f"the answer to {n}")
    return str(said[-1]["text"])


def where(host: OtherHost) -> str:
    return host.url.removeprefix("http://")


async def test_a_redirect_to_another_host_is_answered_and_no_token_follows_it(
    start_bot: BotFactory, hosts: Hosts
) -> None:
    github, gitlab, other = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    for n, status in enumerate((301, 302, 307, 308)):
        gitlab.fail(redirect(other.url, status))
        said = await answer_to(bot, f"ADR: {gitlab.url}{GITLAB_FILE}", n)
        assert (
            f"GitLab answered with a redirect to {where(other)}; the bot never follows a redirect"
            " with its token. If the API moved, set DEBATEBOT_GITLAB_API_URL to its address"
        ) in said
    github.fail(redirect(other.url, 302))
    said = await answer_to(bot, f"ADR: {github.url}/acme/orders/pull/7", 9)
    assert f"GitHub answered with a redirect to {where(other)}" in said
    assert "DEBATEBOT_GITHUB_API_URL" in said
    assert other.requests == [], "nothing, and so no token, reached the other host"
    assert other.credentials() == []
    assert bot.debates() == [], "nothing was debated from the other host"

    # The pull request comment does not follow a redirect either: refused for good.
    clients = HostClients(
        HostConfig(
            github_url=github.url,
            github_token=github.token,
            gitlab_url=gitlab.url,
            gitlab_token=gitlab.token,
        )
    )
    for host, link in (
        (github, parse_link(f"{github.url}/acme/orders/pull/7", clients.config)),
        (
            gitlab,
            parse_link(f"{gitlab.url}/acme/platform/orders/-/merge_requests/7", clients.config),
        ),
    ):
        assert link is not None
        host.fail(redirect(other.url, 307))
        with pytest.raises(LinkError, match="never follows a redirect") as refused:
            await upsert_comment(link, clients, debate_id=1, body="verdict")
        assert not refused.value.transient
    await clients.aclose()
    assert other.requests == []


async def test_a_link_that_climbs_out_of_the_repository_is_refused_before_any_request(
    start_bot: BotFactory, hosts: Hosts
) -> None:
    github, gitlab, _ = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    github.add_file("acme/orders", "main", "docs/adr/0001.md", ADR)
    links = [
        f"{github.url}/acme/orders/blob/main/docs/adr/{UP}{UP}{UP}{UP}{UP}{UP}user/keys.md",
        f"{github.url}/acme/orders/blob/main/docs/adr/%2e%2e/%2E%2E/%2e%2e/user/keys.md",
        f"{github.url}/acme/orders/blob/main/docs\\{UP_BS}{UP_BS}keys.md",
        f"{gitlab.url}/acme/platform/orders/-/blob/main/docs/adr%2F..%2F..%2F..%2Fkeys.md",
        f"{gitlab.url}/acme/platform/orders/-/merge_requests/7/{UP}{UP}{UP}{UP}{UP}user",
    ]
    for n, link in enumerate(links):
        said = await answer_to(bot, f"ADR: {link}", n)
        assert "I cannot debate it: I did not fetch" in said, said
        assert "which could reach outside the repository" in said, said
        assert "Copy the link from" in said, said
    assert github.requests == [], "no request was made for any of them"
    assert gitlab.requests == []

    # A pull request whose file list names a path that climbs out: the file is not fetched.
    github.add_pull(
        "acme/orders",
        8,
        title="ADR 13",
        body="",
        head=HEAD,
        files={f"docs/adr/{UP}{UP}{UP}{UP}user/keys.md": "added"},
    )
    said = await answer_to(bot, f"ADR: {github.url}/acme/orders/pull/8", 9)
    assert (
        "GitHub listed a file in `acme/orders#8` whose path holds a `..` segment, which could"
        " reach outside the repository; I did not fetch it"
    ) in said
    assert not any("/contents/" in r for r in github.requests)
    assert bot.debates() == []


async def test_a_host_that_drips_its_answer_is_answered_at_the_deadline(
    start_bot: BotFactory, hosts: Hosts
) -> None:
    """One byte every 0.2 s would take an hour to finish; the fetch's total deadline (2 s
    here, DEBATEBOT_HOST_TIMEOUT_S) ends it, and the thread says so."""
    github, gitlab, _ = hosts
    bot = await linked_bot(start_bot, github, gitlab, host_timeout_s=2)
    github.fail(HostFault(200, drip_s=0.2, body={"message": "x" * 20_000}))
    started = time.monotonic()
    said = await answer_to(bot, f"ADR: {github.url}{GITHUB_FILE}", 1)
    assert "GitHub did not answer within 2 s; try again later" in said
    assert time.monotonic() - started < 30, "answered at the deadline, not when the drip ends"
    gitlab.fail(HostFault(200, drip_s=0.2))
    said = await answer_to(bot, f"ADR: {gitlab.url}/acme/platform/orders/-/merge_requests/7", 2)
    assert "GitLab did not answer within 2 s; try again later" in said
    assert bot.debates() == []


async def test_an_answer_too_large_or_cut_short_is_refused_not_read_or_debated(
    start_bot: BotFactory, hosts: Hosts
) -> None:
    github, gitlab, _ = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    # 64 MB with no Content-Length: read up to the cap, then the connection is dropped.
    total = 64 * 1024 * 1024
    github.fail(HostFault(200, size=total))
    said = await answer_to(bot, f"ADR: {github.url}/acme/orders/pull/7", 1)
    assert (
        "GitHub's answer for `acme/orders#7` is larger than 8 MB, the most I read of one"
        " answer, so I used none of it"
    ) in said
    assert github.streamed < total // 2, "the bot stopped reading: the host could not send it"

    # A file whose answer claims 100 bytes but holds 3 MB: refused by its size, as a file.
    lying: dict[str, Any] = {
        "type": "file",
        "encoding": "base64",
        "size": 100,
        "content": base64.b64encode(b"# ADR-1\n" + b"x" * 3_000_000).decode(),
    }
    github.fail(HostFault(200, body=lying))
    said = await answer_to(bot, f"ADR: {github.url}{GITHUB_FILE}", 2)
    assert "`docs/adr/0012-postgres.md` is larger than 500 KB and I read at most 500 KB" in said

    # An answer that stops short of the length it claims is not taken for the whole.
    gitlab.fail(HostFault(200, claim=10_000, body={"size": 10, "content": "IyBBRFIK"}))
    said = await answer_to(bot, f"ADR: {gitlab.url}{GITLAB_FILE}", 3)
    assert (
        "GitLab's answer for `acme/platform/orders/docs/adr/0012-postgres.md@abc1234` was cut"
        " off before it was whole, so I used none of it; try again later"
    ) in said
    assert bot.debates() == []
