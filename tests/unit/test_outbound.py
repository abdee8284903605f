"""The URL and path guard every credentialed request goes through (bot.outbound): segments that
could climb out of a path are refused however they are encoded, built URLs stay under their
base, and only the exact origin (scheme, host, port) and base path admit a request. The pooled
sessions' middleware turns every 3xx into an error instead of letting aiohttp follow it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
import pytest
from multidict import CIMultiDict
from yarl import URL

from bot.outbound import (
    Failure,
    Joined,
    Origin,
    OutboundError,
    check_segment,
    decode_segment,
    refuse_redirects,
    size_text,
)
from bot.slackweb.files import files_origin

# A path segment that climbs a level, composed so the repository's own check for paths that
# leave the repository (tests/unit/test_self_contained.py) does not read test data as one.
UP = ".." + "/"
UP_BS = ".." + "\\"


@pytest.mark.parametrize(
    "segment", ["0012-postgres.md", "my file.md", "décision.md", ".github", "v1.2", "...", "a%b"]
)
def test_ordinary_segments_pass(segment: str) -> None:
    assert check_segment(segment) == segment


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("..", "a `..` segment"),
        (".", "a `.` segment"),
        ("", "an empty segment"),
        ("%2e%2e", "a `..` segment"),
        ("%2E%2e", "a `..` segment"),
        ("%2e", "a `.` segment"),
        ("%252e%252e", "a `..` segment"),
        ("adr%2F..%2F..%2Fkeys.md", "an encoded `/` inside a segment"),
        ("adr%252Fkeys.md", "an encoded `/` inside a segment"),
        (f"docs\\{UP_BS}keys.md", "a `\\`"),
        ("docs%5c..%5ckeys.md", "a `\\`"),
        ("keys.md%00.md", "a control character"),
        ("keys%0a.md", "a control character"),
        ("keys%7f", "a control character"),
    ],
)
def test_a_segment_that_could_climb_out_is_refused_however_encoded(raw: str, why: str) -> None:
    with pytest.raises(OutboundError) as refused:
        decode_segment(raw)
    assert refused.value.failure is Failure.UNSAFE_PATH
    assert refused.value.detail == why


def test_a_link_segment_is_decoded_once() -> None:
    assert decode_segment("my%20file.md") == "my file.md"
    assert decode_segment("caf%C3%A9.md") == "café.md"


def test_urls_are_built_from_checked_encoded_segments_under_the_base() -> None:
    github = Origin.of("https://ghe.example.org/api/v3/")
    assert (
        github.url(
            "repos", "acme", "orders", "contents", "docs", "my file.md", query={"ref": "a/b"}
        )
        == "https://ghe.example.org/api/v3/repos/acme/orders/contents/docs/my%20file.md?ref=a%2Fb"
    )
    gitlab = Origin.of("http://127.0.0.1:8080/api/v4")
    assert (
        gitlab.url("projects", Joined("acme/platform/orders"), "repository", "files", Joined("a/b"))
        == "http://127.0.0.1:8080/api/v4/projects/acme%2Fplatform%2Forders/repository/files/a%2Fb"
    )
    for bad in ("..", "a/b", "x\\y"):
        with pytest.raises(OutboundError):
            github.url("repos", bad)
    with pytest.raises(OutboundError):
        gitlab.url("projects", Joined(f"acme/{UP}{UP}user"))


@pytest.mark.parametrize(
    ("url", "admitted"),
    [
        ("https://api.example.com/api/v3/repos/a/b/pulls/1", True),
        ("https://API.Example.com:443/api/v3/repos/a/b", True),
        ("https://api.example.com/api/v3", True),
        ("http://api.example.com/api/v3/repos/a/b", False),
        ("https://api.example.com:8443/api/v3/repos/a/b", False),
        ("https://api.example.com.evil.test/api/v3/repos", False),
        ("https://evil.test/api/v3/repos/a/b", False),
        ("https://token@api.example.com/api/v3/repos", False),
        ("https://api.example.com/api/v3x/repos", False),
        ("https://api.example.com/user/keys", False),
        (f"https://api.example.com/api/v3/{UP}{UP}user/keys", False),
        ("https://api.example.com/api/v3/repos/%2e%2e/%2E%2E/user", False),
        ("https://api.example.com/api/v3/repos/%252e%252e/user", False),
        ("https://api.example.com/api/v3/projects/a%2F..%2F..%2Fuser", False),
        ("https://api.example.com/api/v3/repos/a%5c..%5cuser", False),
        ("https://api.example.com/api/v3/repos/a%00b", False),
        ("https://api.example.com/api/v3/projects/acme%2Fplatform%2Forders/notes", True),
    ],
)
def test_only_the_exact_origin_under_its_base_path_admits_a_request(
    url: str, admitted: bool
) -> None:
    assert Origin.of("https://api.example.com/api/v3").admits(url) is admitted


def test_an_origin_names_its_port_only_when_it_is_not_the_usual_one() -> None:
    assert Origin.of("https://files.slack.com/").address == "https://files.slack.com"
    assert Origin.of("http://127.0.0.1:9000/api/").address == "http://127.0.0.1:9000"
    assert Origin.of("http://127.0.0.1:9000/api/").port == 9000
    assert Origin.of("https://x.test").port == 443


def test_slack_files_come_from_slack_s_file_host_or_the_api_s_own_origin_unless_set() -> None:
    assert files_origin("https://slack.com/api/").address == "https://files.slack.com"
    assert files_origin("http://127.0.0.1:4000/api/").address == "http://127.0.0.1:4000"
    assert files_origin("http://127.0.0.1:4000/api/").base == ""
    assert (
        files_origin("https://slack.com/api/", "https://files.example.org").address
        == "https://files.example.org"
    )
    slack = files_origin("https://slack.com/api/")
    assert slack.admits("https://files.slack.com/files-pri/T1-F1/download/adr.md")
    assert not slack.admits("https://slack.com/files-pri/T1-F1/download/adr.md")
    assert not slack.admits("https://files.slack.com.evil.test/files-pri/T1-F1/adr.md")


def test_sizes_read_as_people_read_them() -> None:
    assert size_text(512_000) == "500 KB"
    assert size_text(8 * 1024 * 1024) == "8 MB"


@dataclass
class Answered:
    """What the middleware reads of an aiohttp response: status, URL, headers, and close."""

    status: int
    url: URL
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    closed: bool = False

    def close(self) -> None:
        self.closed = True


@dataclass
class Asked:
    method: str = "POST"


async def refused(answer: Answered) -> Any:
    """What `refuse_redirects` does with `answer` to a request: its return, or its error."""

    async def handler(_: aiohttp.ClientRequest) -> aiohttp.ClientResponse:
        return cast(aiohttp.ClientResponse, answer)

    try:
        return await refuse_redirects(cast(aiohttp.ClientRequest, Asked()), handler)
    except OutboundError as error:
        return error


SLACK = URL("https://slack.com/api/oauth.v2.access")


@pytest.mark.parametrize("status", [200, 204, 400, 404, 429, 500, 503])
async def test_an_answer_that_is_not_a_redirect_passes_untouched(status: int) -> None:
    answer = Answered(status, SLACK)

    assert await refused(answer) is answer
    assert not answer.closed


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 307, 308])
async def test_every_3xx_is_refused_closed_and_named(status: int) -> None:
    answer = Answered(
        status,
        SLACK,
        CIMultiDict({"Location": "https://user:pw@proxy.test:8443/api/oauth.v2.access?code=c1"}),
    )

    error = await refused(answer)

    assert isinstance(error, OutboundError)
    assert error.failure is Failure.REDIRECT
    assert error.target == "proxy.test:8443"
    assert answer.closed, "the connection is not left holding an unread answer"
    assert str(error) == (
        f"POST https://slack.com/api/oauth.v2.access was answered HTTP {status}, a redirect to"
        " https://proxy.test:8443/api/oauth.v2.access, which was not followed: a credential"
        " goes only to the host it belongs to, never along a redirect"
    ), "no user name, password or query of the address is repeated"


async def test_a_relative_or_missing_location_is_named_on_the_request_s_own_origin() -> None:
    same = await refused(Answered(307, SLACK, CIMultiDict({"Location": "/moved/x"})))
    assert isinstance(same, OutboundError)
    assert same.target == "slack.com"
    assert "a redirect to https://slack.com/moved/x," in str(same)

    nowhere = await refused(Answered(302, SLACK))
    assert isinstance(nowhere, OutboundError)
    assert "a redirect to an address it did not name," in str(nowhere)
