"""Where linked ADRs are read from: the link's shape and the API address for each host."""

from __future__ import annotations

import pytest

from bot.hosts.clients import HostClients
from bot.hosts.links import HostConfig, LinkError, find_link, parse_link

# A path segment that climbs a level, composed so the repository's own check for paths that
# leave the repository (tests/unit/test_self_contained.py) does not read test data as one.
UP = ".." + "/"
UP_BS = ".." + "\\"


@pytest.mark.parametrize(
    ("config", "api"),
    [
        (HostConfig(), "https://api.github.com"),
        (HostConfig(github_url="https://octo.ghe.com"), "https://api.octo.ghe.com"),
        (HostConfig(github_url="https://git.example.org/"), "https://git.example.org/api/v3"),
        (
            HostConfig(github_api_url="http://127.0.0.1:8080/github/"),
            "http://127.0.0.1:8080/github",
        ),
    ],
)
def test_the_github_api_address_follows_the_kind_of_host_unless_set(
    config: HostConfig, api: str
) -> None:
    assert config.github_api == api


def test_the_gitlab_api_address_is_the_host_unless_set() -> None:
    assert HostConfig().gitlab_api == "https://gitlab.com"
    assert HostConfig(gitlab_api_url="http://127.0.0.1:9/").gitlab_api == "http://127.0.0.1:9"


def test_links_are_recognised_by_the_address_people_see_not_the_api() -> None:
    config = HostConfig(github_api_url="http://127.0.0.1:8080", gitlab_api_url="http://127.0.0.1:9")
    pull = parse_link("https://github.com/acme/orders/pull/7", config)
    assert pull is not None
    assert (pull.host, pull.repo, pull.number) == ("github", "acme/orders", 7)
    merge = parse_link("https://gitlab.com/acme/platform/orders/-/merge_requests/3", config)
    assert merge is not None
    assert (merge.repo, merge.kind) == ("acme/platform/orders", "pull")
    assert parse_link("http://127.0.0.1:8080/acme/orders/pull/7", config) is None


@pytest.mark.parametrize(
    "url",
    [
        f"https://github.com/acme/orders/blob/main/docs/adr/{UP}{UP}{UP}{UP}{UP}{UP}user/keys.md",
        "https://github.com/acme/orders/blob/main/docs/adr/%2e%2e/%2E%2E/%2e%2e/user/keys.md",
        "https://github.com/acme/orders/blob/main/docs/adr%2F..%2F..%2Fkeys.md",
        f"https://github.com/acme/orders/blob/main/docs\\{UP_BS}{UP_BS}keys.md",
        "https://github.com/acme/orders/blob/main/docs/%5c..%5ckeys.md",
        "https://github.com/acme/orders/blob/main/./docs/adr/1.md",
        "https://github.com/acme/orders/blob/main/docs//adr/1.md",
        "https://github.com/acme/%2e%2e/pull/7",
        "https://gitlab.com/acme/platform/orders/-/blob/main/docs/%252e%252e/keys.md",
        f"https://gitlab.com/acme/platform/orders/-/merge_requests/7/{UP}{UP}{UP}{UP}{UP}user",
        f"https://gitlab.com/acme/{UP}{UP}-/merge_requests/7",
        "https://github.com/acme/orders/blob/main/docs/adr/1.md%0a",
    ],
)
def test_a_link_whose_path_could_climb_out_of_the_repository_is_refused(url: str) -> None:
    with pytest.raises(LinkError, match="could reach outside the repository") as refused:
        parse_link(url, HostConfig())
    assert not refused.value.transient
    with pytest.raises(LinkError):
        find_link(f"please review <{url}>", HostConfig())


def test_link_parts_are_decoded_once_and_links_elsewhere_are_not_ours() -> None:
    link = parse_link(
        "https://github.com/acme/orders/blob/main/docs/adr/0012%20use%20caf%C3%A9.md#L3",
        HostConfig(),
    )
    assert link is not None
    assert (link.repo, link.ref, link.path) == ("acme/orders", "main", "docs/adr/0012 use café.md")
    trailing = parse_link("https://github.com/acme/orders/pull/7/", HostConfig())
    assert trailing is not None
    assert trailing.number == 7
    assert (
        parse_link(f"https://example.com/acme/orders/blob/main/{UP}{UP}etc/passwd", HostConfig())
        is None
    )


def test_each_host_s_token_goes_only_to_its_api_address() -> None:
    clients = HostClients(
        HostConfig(github_url="https://git.example.org", gitlab_api_url="http://127.0.0.1:9/")
    )
    assert clients.origin("github").address == "https://git.example.org"
    assert clients.origin("github").base == "/api/v3"
    assert clients.origin("gitlab").address == "http://127.0.0.1:9"
    assert clients.origin("gitlab").base == "/api/v4"
