"""ADRs linked from GitHub and GitLab, debated end to end through the Slack emulator against
loopback host APIs: every link shape, the verdict comment once on the pull request (across
retries and resumes, updated by the review), and the failures people are told about."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from bot.hosts.clients import CONNECTIONS, HostClients
from bot.hosts.comments import upsert_comment
from bot.hosts.fetch import fetch
from bot.hosts.links import HostConfig, LinkError, parse_link
from bot.jobs.pr_comments import PullRequestComments
from bot.messages import action_ids
from bot.store import channels
from bot.store.db import session_scope
from engine.models import utcnow
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.host_emulators import (
    GitHubEmulator,
    GitLabEmulator,
    HostFault,
    rate_limited_github,
    rate_limited_gitlab,
)
from tests.e2e.test_reviews import NOTE
from tests.e2e.test_serve import free_port
from tests.e2e.test_triggers import message_event
from tests.helpers import REPO_ROOT

ADR = (REPO_ROOT / "tests" / "data" / "adr_corpus" / "nygard" / "nygard-numbered.md").read_text()
ADR_TITLE = "12. Use PostgreSQL for the order service"
HEAD = "9f2c1e7"


@pytest.fixture
async def hosts() -> AsyncIterator[tuple[GitHubEmulator, GitLabEmulator]]:
    github, gitlab = GitHubEmulator(), GitLabEmulator()
    await github.start()
    await gitlab.start()
    for host, repo in ((github, "acme/orders"), (gitlab, "acme/platform/orders")):
        host.add_file(repo, "abc1234", "docs/adr/0012-postgres.md", ADR)
        host.add_file(repo, HEAD, "docs/adr/0012-postgres.md", ADR)
        host.add_pull(
            repo,
            7,
            title="ADR 12: move orders to Postgres",
            body="Proposing ADR 12; migration plan in the ADR.",
            head=HEAD,
            files={"docs/adr/0012-postgres.md": "added", "README.md": "modified"},
        )
    yield github, gitlab
    await github.stop()
    await gitlab.stop()


async def linked_bot(
    start_bot: BotFactory, github: GitHubEmulator, gitlab: GitLabEmulator, **overrides: Any
) -> Bot:
    hosts: dict[str, Any] = {
        "github_url": github.url,
        "github_token": github.token,
        "gitlab_url": gitlab.url,
        "gitlab_token": gitlab.token,
    }
    bot = await start_bot(**(hosts | overrides))
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session,
            channel_id=CHANNEL,
            updated_by=ADMIN,
            values={"adr_watch": True, "pr_comment": True, "reviewers": [REVIEWER]},
        )
    return bot


async def post(bot: Bot, text: str, n: int) -> str:
    ts = bot.emulator.seed_message(CHANNEL, text)
    await bot.driver.event(message_event(ts, text, user=f"ULINK{n}"), event_id=f"EvL{n}")
    return ts


async def approve(bot: Bot, request: dict[str, Any]) -> None:
    """The reviewer approves the review request, with the usual note."""
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    await bot.driver.submit(view, NOTE, user=REVIEWER)


def context_of(bot: Bot, index: int = -1) -> list[dict[str, str]]:
    context: list[dict[str, str]] = json.loads(bot.debates()[index].spec_json)["context"]
    return context


async def test_every_link_shape_is_fetched_and_debated_in_its_thread(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    links = [
        f"{github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md",
        f"{github.url}/acme/orders/pull/7",
        f"{gitlab.url}/acme/platform/orders/-/blob/abc1234/docs/adr/0012-postgres.md",
        f"{gitlab.url}/acme/platform/orders/-/merge_requests/7",
    ]
    threads = [await post(bot, f"Please review <{link}>", n) for n, link in enumerate(links)]
    # The links are fetched concurrently, so they are queued in any order: match by link.
    by_link = {d.link: d for d in await bot.finished(4)}
    debates = [by_link[link] for link in links]

    assert [d.thread_ts for d in debates] == threads
    assert [d.source for d in debates] == ["link"] * 4
    assert ADR_TITLE in debates[0].question
    for n, debate in enumerate(debates):
        context = json.loads(debate.spec_json)["context"]
        assert (
            context[0]["title"]
            == f"docs/adr/0012-postgres.md @ {'abc1234' if n % 2 == 0 else HEAD}"
        )
        assert "logical replication" in context[0]["text"]
        titles = [doc["title"] for doc in context]
        assert not any("README" in t for t in titles), "only ADR files of the pull request"
    pull_context = json.loads(debates[1].spec_json)["context"]
    assert "Proposing ADR 12" in pull_context[1]["text"], "the description comes along"
    assert "ADR 12: move orders to Postgres" in debates[1].question


async def test_the_verdict_is_commented_once_and_updated_by_the_review(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    await post(bot, f"ADR up for review: {github.url}/acme/orders/pull/7", 1)
    await post(bot, f"and on GitLab: {gitlab.url}/acme/platform/orders/-/merge_requests/7", 2)
    debates = await bot.finished(2)
    # The two links are fetched concurrently, so either may be queued first.
    first = next(d for d in debates if d.link and d.link.startswith(github.url))
    second = next(d for d in debates if d is not first)

    def comments(host: GitHubEmulator | GitLabEmulator, repo: str) -> list[dict[str, Any]]:
        return host.comments.get((repo, 7), [])

    await bot.wait_for(lambda: comments(github, "acme/orders"), "the GitHub comment")
    await bot.wait_for(lambda: comments(gitlab, "acme/platform/orders"), "the GitLab note")
    [comment] = comments(github, "acme/orders")
    assert f"<!-- debatebot:debate-{first.id} -->" in comment["body"]
    assert "**debatebot verdict: revise**" in comment["body"]
    assert first.thread_ts is not None
    assert (
        f"https://slack.com/archives/{CHANNEL}/p{first.thread_ts.replace('.', '')}"
        in (comment["body"])
    )
    assert "Waiting for a human review in Slack." in comment["body"]

    # A retried ending or a resumed run syncs again: still one comment, on both hosts.
    clients = bot.runtime.surfaces.get(WORKSPACE).starts.hosts
    assert clients is not None
    follower = PullRequestComments(bot.engine, clients)
    assert await follower.sync(first.id or 0) == str(comment["id"])
    await follower.sync(second.id or 0)
    assert len(comments(github, "acme/orders")) == 1
    assert len(comments(gitlab, "acme/platform/orders")) == 1

    request = await bot.in_thread(first.thread_ts, "Review needed", "the review request")
    await approve(bot, request)
    await bot.wait_for(
        lambda: "**Review: approved**" in comments(github, "acme/orders")[0]["body"],
        "the updated comment",
    )
    assert "Fallback owner agreed offline." in comments(github, "acme/orders")[0]["body"]
    assert len(comments(github, "acme/orders")) == 1


async def test_a_comment_the_host_refused_is_posted_by_the_retry_job_once_it_is_back(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    github.down("/comments")
    await post(bot, f"ADR up for review: {github.url}/acme/orders/pull/7", 1)
    [debate] = await bot.finished(1)
    await bot.wait_for(
        lambda: any("/comments" in r for r in github.requests), "the refused comment sync"
    )
    assert github.comments.get(("acme/orders", 7)) is None
    [debate] = bot.debates()
    assert debate.pr_comment_due is not None, "the refused comment stays due"

    jobs = bot.runtime.jobs
    jobs.clock = lambda: utcnow() + timedelta(minutes=1)
    # Still down: the job tries, the comment stays due for the next slot.
    assert await jobs.fire("pr-comments", jobs.retry_pr_comments, 60.0) == (
        "0 comment(s) synced of 1 due"
    )
    github.restore()
    jobs.clock = lambda: utcnow() + timedelta(minutes=2)
    assert await jobs.fire("pr-comments", jobs.retry_pr_comments, 60.0) == (
        "1 comment(s) synced of 1 due"
    )
    [comment] = github.comments[("acme/orders", 7)]
    assert f"<!-- debatebot:debate-{debate.id} -->" in comment["body"]
    assert bot.debates()[0].pr_comment_due is None
    jobs.clock = lambda: utcnow() + timedelta(minutes=3)
    assert await jobs.fire("pr-comments", jobs.retry_pr_comments, 60.0) == (
        "0 comment(s) synced of 0 due"
    )

    # A review decided while the host is down: the comment falls behind, and catches up.
    github.down("/comments")
    assert debate.thread_ts is not None
    request = await bot.in_thread(debate.thread_ts, "Review needed", "the review request")
    tried = len([r for r in github.requests if "/comments" in r])
    await approve(bot, request)
    # The review's own sync is one request, refused: only then does the host come back.
    await bot.wait_for(
        lambda: len([r for r in github.requests if "/comments" in r]) > tried,
        "the review's refused sync",
    )
    assert bot.debates()[0].pr_comment_due is not None, "the review marked the comment due"
    github.restore()
    jobs.clock = lambda: utcnow() + timedelta(minutes=4)
    assert await jobs.fire("pr-comments", jobs.retry_pr_comments, 60.0) == (
        "1 comment(s) synced of 1 due"
    )
    [comment] = github.comments[("acme/orders", 7)]
    assert "**Review: approved**" in comment["body"]


async def test_a_comment_the_host_refuses_for_good_is_not_retried(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    github.down("/comments", status=404)
    await post(bot, f"ADR up for review: {github.url}/acme/orders/pull/7", 1)
    await bot.finished(1)
    await bot.wait_for(lambda: bot.debates()[0].pr_comment_due is None, "the cleared mark")
    assert any("/comments" in r for r in github.requests), "the comment was tried"
    github.restore()
    jobs = bot.runtime.jobs
    jobs.clock = lambda: utcnow() + timedelta(minutes=1)
    assert await jobs.fire("pr-comments", jobs.retry_pr_comments, 60.0) == (
        "0 comment(s) synced of 0 due"
    )
    assert github.comments.get(("acme/orders", 7)) is None


async def test_private_repositories_rate_limits_and_large_files_are_answered_in_the_thread(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab, github_token=None)
    github.private.add("acme/secret")
    github.add_file("acme/orders", "abc1234", "docs/adr/0099-huge.md", "# ADR-99\n" + "x" * 600_000)

    private = await post(bot, f"{github.url}/acme/secret/blob/abc1234/docs/adr/1.md", 1)
    huge = await post(bot, f"{github.url}/acme/orders/blob/abc1234/docs/adr/0099-huge.md", 2)

    def said(ts: str) -> list[str]:
        return [m["text"] for m in bot.emulator.in_thread(CHANNEL, ts)]

    refusal = await bot.wait_for(lambda: said(private), "the private-repository answer")
    assert "I cannot see `acme/secret/docs/adr/1.md@abc1234` on GitHub" in refusal[-1]
    assert "DEBATEBOT_GITHUB_TOKEN" in refusal[-1]
    too_big = await bot.wait_for(lambda: said(huge), "the size answer")
    assert "`docs/adr/0099-huge.md` is 585 KB and I read at most 500 KB" in too_big[-1]

    github.fail(rate_limited_github(reset_in_s=1))
    gitlab.fail(rate_limited_gitlab(retry_after_s=1))
    await post(bot, f"{github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md", 3)
    await post(
        bot, f"{gitlab.url}/acme/platform/orders/-/blob/abc1234/docs/adr/0012-postgres.md", 4
    )
    debates = await bot.finished(2)
    assert len(debates) == 2, "both rate limits were waited out, then the files were read"

    github.fail(rate_limited_github(reset_in_s=3600))
    later = await post(bot, f"{github.url}/acme/orders/pull/7", 5)
    limited = await bot.wait_for(lambda: said(later), "the rate-limit answer")
    assert "GitHub's rate limit is used up; ask again after" in limited[-1]


async def test_debate_dash_adr_takes_a_link(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    await bot.driver.command(f"--adr <{gitlab.url}/acme/platform/orders/-/merge_requests/7>")
    [debate] = await bot.finished()
    assert "ADR 12: move orders to Postgres" in debate.question
    assert context_of(bot)[0]["title"] == f"docs/adr/0012-postgres.md @ {HEAD}"
    seen = len(bot.emulator.responses)
    await bot.driver.command("Adopt it? --adr https://example.com/adr.md")
    answers = await bot.wait_for(lambda: bot.emulator.responses[seen:], "the refusal")
    assert "not a link to a file or a pull request" in answers[-1]["text"]
    assert len(bot.debates()) == 1


async def test_the_review_reaction_on_a_thread_about_a_pull_request_debates_its_adr(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    root = bot.emulator.seed_message(CHANNEL, f"Thoughts on <{github.url}/acme/orders/pull/7>?")
    reply = bot.emulator.seed_message(CHANNEL, "Replication lag worries me.", thread_ts=root)
    await bot.driver.event(
        {
            "type": "reaction_added",
            "user": "UBOB",
            "reaction": "scales",
            "item": {"type": "message", "channel": CHANNEL, "ts": reply},
            "event_ts": "2.0",
        }
    )
    [debate] = await bot.finished()
    assert (debate.source, debate.thread_ts) == ("reaction", root)
    titles = [doc["title"] for doc in context_of(bot)]
    assert titles == [
        f"docs/adr/0012-postgres.md @ {HEAD}",
        "Pull request acme/orders#7: description",
        "Slack thread",
    ]
    assert "Replication lag worries me." in context_of(bot)[2]["text"]
    await bot.wait_for(lambda: github.comments.get(("acme/orders", 7)), "the comment")


async def test_a_host_that_fails_or_hangs_is_answered_not_waited_on_forever(
    hosts: tuple[GitHubEmulator, GitLabEmulator],
) -> None:
    github, gitlab = hosts
    clients = HostClients(
        HostConfig(
            github_url=github.url,
            github_token=github.token,
            gitlab_url=gitlab.url,
            gitlab_token=gitlab.token,
            timeout_s=1,
        )
    )
    file_link = parse_link(
        f"{gitlab.url}/acme/platform/orders/-/blob/abc1234/docs/adr/0012-postgres.md",
        clients.config,
    )
    assert file_link is not None
    gitlab.fail(HostFault(502))
    with pytest.raises(LinkError, match=r"GitLab answered HTTP 502 for `acme/platform/orders/"):
        await fetch(file_link, clients)
    pull = parse_link(f"{github.url}/acme/orders/pull/7", clients.config)
    assert pull is not None
    github.fail(HostFault(200, hang_s=3))
    with pytest.raises(LinkError, match=r"GitHub did not answer within 1 s; try again later"):
        await fetch(pull, clients)
    # The comment sync meets a host that is down: logged, nothing raised, nothing posted.
    github.fail(HostFault(503), HostFault(503))
    with pytest.raises(LinkError, match="GitHub answered HTTP 503"):
        await upsert_comment(pull, clients, debate_id=1, body="verdict")
    assert github.comments.get(("acme/orders", 7)) is None
    await clients.aclose()


async def test_fetches_share_a_few_kept_alive_connections_to_each_host(
    hosts: tuple[GitHubEmulator, GitLabEmulator],
) -> None:
    """One pooled session per process: fetches one after another reuse one connection, and
    a burst of them never opens more than the pool holds."""
    github, gitlab = hosts
    clients = HostClients(
        HostConfig(
            github_url=github.url,
            github_token=github.token,
            gitlab_url=gitlab.url,
            gitlab_token=gitlab.token,
        )
    )
    file_link = parse_link(
        f"{github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md", clients.config
    )
    pull = parse_link(f"{gitlab.url}/acme/platform/orders/-/merge_requests/7", clients.config)
    assert file_link is not None
    assert pull is not None

    for _ in range(10):
        assert (await fetch(file_link, clients)).documents[0].text == ADR
    assert github.connections == 1

    together = await asyncio.gather(*(fetch(pull, clients) for _ in range(40)))

    assert all(fetched.title == together[0].title for fetched in together)
    assert len(gitlab.requests) >= 80
    assert 1 <= gitlab.connections <= CONNECTIONS
    await clients.aclose()


async def test_a_merge_request_s_files_come_from_diffs_page_by_page_or_changes_on_old_gitlab(
    hosts: tuple[GitHubEmulator, GitLabEmulator],
) -> None:
    _, gitlab = hosts
    clients = HostClients(HostConfig(gitlab_url=gitlab.url, gitlab_token=gitlab.token))
    files = {f"src/module_{n:03}.py": "modified" for n in range(250)}
    gitlab.add_pull(
        "acme/platform/orders",
        8,
        title="Big refactor, with its ADR",
        body="",
        head=HEAD,
        files=files | {"docs/adr/0012-postgres.md": "added"},
    )
    link = parse_link(f"{gitlab.url}/acme/platform/orders/-/merge_requests/8", clients.config)
    assert link is not None

    fetched = await fetch(link, clients)
    assert [d.title for d in fetched.documents] == [f"docs/adr/0012-postgres.md @ {HEAD}"]
    pages = [r for r in gitlab.requests if "/merge_requests/8/diffs" in r]
    assert len(pages) == 3, "the ADR was on the third page of a hundred files each"
    assert not any("/changes" in r for r in gitlab.requests)

    gitlab.legacy = True
    fetched = await fetch(link, clients)
    assert [d.title for d in fetched.documents] == [f"docs/adr/0012-postgres.md @ {HEAD}"]
    assert any("/merge_requests/8/changes" in r for r in gitlab.requests)
    await clients.aclose()


async def test_links_posted_in_passing_start_nothing_and_get_no_answer(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    github, gitlab = hosts
    bot = await linked_bot(start_bot, github, gitlab)
    github.add_file("acme/orders", "abc1234", "src/orders/refund.py", "def refund(): ...\n")
    github.add_pull(
        "acme/orders", 8, title="Fix refunds", body="", head=HEAD, files={"src/a.py": "modified"}
    )
    code = await post(
        bot, f"the bug is here {github.url}/acme/orders/blob/abc1234/src/orders/refund.py", 1
    )
    fix = await post(bot, f"fix: {github.url}/acme/orders/pull/8", 2)
    await post(bot, f"ADR: {github.url}/acme/orders/blob/abc1234/docs/adr/0012-postgres.md", 3)
    [debate] = await bot.finished()
    assert debate.link is not None
    assert debate.link.endswith("0012-postgres.md")
    assert bot.emulator.in_thread(CHANNEL, code) == []
    assert bot.emulator.in_thread(CHANNEL, fix) == []


async def test_github_com_and_gitlab_com_links_are_fetched_from_the_configured_api_addresses(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    """People link github.com and gitlab.com; the APIs answer where the settings say (a proxy,
    a mirror): the links are read there and the comment posted there."""
    github, gitlab = hosts
    bot = await linked_bot(
        start_bot,
        github,
        gitlab,
        github_url="https://github.com",
        github_api_url=f"{github.url}/api/v3",
        gitlab_url="https://gitlab.com",
        gitlab_api_url=gitlab.url,
    )
    links = [
        "https://github.com/acme/orders/pull/7",
        "https://gitlab.com/acme/platform/orders/-/merge_requests/7",
    ]
    for n, link in enumerate(links):
        await post(bot, f"ADR up for review: <{link}>", n)
    by_link = {d.link: d for d in await bot.finished(2)}
    assert set(by_link) == set(links)
    for link in links:
        context = json.loads(by_link[link].spec_json)["context"]
        assert context[0]["title"] == f"docs/adr/0012-postgres.md @ {HEAD}"
        assert "logical replication" in context[0]["text"]
    await bot.wait_for(lambda: github.comments.get(("acme/orders", 7)), "the GitHub comment")
    await bot.wait_for(
        lambda: gitlab.comments.get(("acme/platform/orders", 7)), "the GitLab comment"
    )


async def test_an_api_address_that_is_down_or_failing_is_answered_in_the_thread(
    start_bot: BotFactory, hosts: tuple[GitHubEmulator, GitLabEmulator]
) -> None:
    """DEBATEBOT_GITHUB_API_URL names an address where nothing listens, and the GitLab API at
    DEBATEBOT_GITLAB_API_URL answers 502: each link gets its reason in its thread, and nothing
    is debated from a document that was never read."""
    github, gitlab = hosts
    closed = free_port()
    bot = await linked_bot(
        start_bot,
        github,
        gitlab,
        github_url="https://github.com",
        github_api_url=f"http://127.0.0.1:{closed}/api/v3",
        gitlab_url="https://gitlab.com",
        gitlab_api_url=gitlab.url,
    )
    gitlab.down("merge_requests", 502)
    unreachable = await post(bot, "ADR up for review: <https://github.com/acme/orders/pull/7>", 1)
    failing = await post(bot, "and <https://gitlab.com/acme/platform/orders/-/merge_requests/7>", 2)

    def said(ts: str) -> list[str]:
        return [m["text"] for m in bot.emulator.in_thread(CHANNEL, ts)]

    answer = await bot.wait_for(lambda: said(unreachable), "the unreachable-host answer")
    assert re.search(r"I could not reach GitHub \(\w+\); try later", answer[-1]), answer[-1]
    answer = await bot.wait_for(lambda: said(failing), "the failing-host answer")
    assert "GitLab answered HTTP 502 for `acme/platform/orders!7`" in answer[-1], answer[-1]
    assert bot.debates() == []
