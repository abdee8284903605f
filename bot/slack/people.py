"""Who may do what: reviewers (users or user groups), channel owners and workspace admins.

Answers come from Slack (`users.info`, `usergroups.users.list`, `users.conversations`) and are
cached briefly, so a burst of clicks does not hit Slack's rate limits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)


class SlackDirectory:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._clock = clock
        self._admins: dict[str, tuple[float, bool]] = {}
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    async def is_admin(self, user: str) -> bool:
        """Workspace admins and owners may change any channel's settings and decide reviews
        in channels without reviewers."""
        cached = self._admins.get(user)
        if cached and cached[0] > self._clock():
            return cached[1]
        try:
            info = await self.client.users_info(user=user)
        except SlackApiError as error:
            log.error("users.info for %s failed: %s", user, error.response.get("error"))
            return False
        profile = info.get("user") or {}
        admin = bool(profile.get("is_admin") or profile.get("is_owner"))
        self._admins[user] = (self._clock() + self.ttl_s, admin)
        return admin

    async def group_members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(group)
        if cached and cached[0] > self._clock():
            return cached[1]
        try:
            response = await self.client.usergroups_users_list(usergroup=group)
        except SlackApiError as error:
            log.error("usergroups.users.list for %s failed: %s", group, error.response.get("error"))
            return frozenset()
        members = frozenset(response.get("users") or [])
        self._groups[group] = (self._clock() + self.ttl_s, members)
        return members

    async def is_one_of(self, user: str, people: Sequence[str]) -> bool:
        """Whether `user` is listed directly or belongs to a listed user group."""
        if user in people:
            return True
        for person in people:
            if person.startswith("S") and user in await self.group_members(person):
                return True
        return False

    async def may_review(self, user: str, reviewers: Sequence[str]) -> bool:
        if reviewers:
            return await self.is_one_of(user, reviewers)
        return await self.is_admin(user)

    async def may_configure(self, user: str, owners: Sequence[str]) -> bool:
        return await self.is_one_of(user, owners) or await self.is_admin(user)

    async def channels_of(self, user: str) -> list[str]:
        """Public and private channels `user` is in (as far as the bot can see), for App Home."""
        channels: list[str] = []
        cursor = None
        while True:
            try:
                response = await self.client.users_conversations(
                    user=user, types="public_channel,private_channel", limit=200, cursor=cursor
                )
            except SlackApiError as error:
                log.error(
                    "users.conversations for %s failed: %s", user, error.response.get("error")
                )
                return channels
            channels += [c["id"] for c in response.get("channels") or []]
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return channels
