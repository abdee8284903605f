"""Where linked ADRs are read from: the link's shape and the API address for each host."""

from __future__ import annotations

import pytest

from bot.hosts import HostConfig, parse_link


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
