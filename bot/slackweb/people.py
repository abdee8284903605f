"""Who may do what, and where the bot may post: reviewers (users or user groups), channel
owners, workspace admins, the bot's membership of a channel, its team (a stream's recipient's)
and its own replies in a thread.

Answers come from Slack (`users.info`, `users.list`, `usergroups.users.list`,
`users.conversations`, `conversations.info`, `conversations.replies`, `auth.test`). Admin status
and user groups' members are cached for a minute, the bot's identity, team and DM channels for
the process, so a burst of clicks does not hit Slack's rate limits; the others are asked each
time. A lookup Slack cannot
answer is logged and treated as "no" (or, for membership, "unknown"), never as a crash, except
the list of admins, whose failure is raised so the caller retries instead of concluding there
are none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slackweb.acting import ACTING_FOR
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.poster import SLACK_FAILURES, classify, token_refusal
from bot.store.tenancy import Workspace

log = logging.getLogger(__name__)


class SlackDirectory:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl_s: float = 60.0,
        lookup_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.lookup_s = lookup_s
        self._clock = clock
        # Keyed by the workspace the calls are made for as well (bot.slackweb.acting): one
        # directory serves the delivery loop of every workspace, and on Enterprise Grid a person
        # is an admin, and has a DM channel, per workspace.
        self._admins: dict[tuple[str, str], tuple[float, bool]] = {}
        self._groups: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}
        self._bot: tuple[str | None, str] | None = None
        self._workspace: Workspace | None = None
        self._dms: dict[tuple[str, str], str] = {}
        self._teams: dict[tuple[str, str], str | None] = {}

    async def is_admin(self, user: str) -> bool:
        """Workspace admins and owners may change any channel's settings and decide reviews
        in channels without reviewers."""
        cached = self._admins.get(_acting(user))
        if cached and cached[0] > self._clock():
            return cached[1]
        try:
            info = await self.client.users_info(user=user)
        except SLACK_FAILURES as error:
            log.error("users.info for %s failed: %s", user, classify(error, "users.info", "-"))
            return False
        profile = info.get("user") or {}
        admin = bool(profile.get("is_admin") or profile.get("is_owner"))
        self._admins[_acting(user)] = (self._clock() + self.ttl_s, admin)
        return admin

    async def group_members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(_acting(group))
        if cached and cached[0] > self._clock():
            return cached[1]
        try:
            response = await self.client.usergroups_users_list(usergroup=group)
        except SLACK_FAILURES as error:
            why = classify(error, "usergroups.users.list", "-")
            log.error("usergroups.users.list for %s failed: %s", group, why)
            return frozenset()
        members = frozenset(response.get("users") or [])
        self._groups[_acting(group)] = (self._clock() + self.ttl_s, members)
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
            except SLACK_FAILURES as error:
                why = classify(error, "users.conversations", "-")
                log.error("users.conversations for %s failed: %s", user, why)
                return channels
            channels += [c["id"] for c in response.get("channels") or []]
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return channels

    async def people_in(self, people: Sequence[str]) -> list[str]:
        """The user ids `people` names, user groups expanded, in order, each once."""
        users: list[str] = []
        for person in people:
            members = (
                sorted(await self.group_members(person)) if person.startswith("S") else [person]
            )
            users += [m for m in members if m not in users]
        return users

    async def admins(self) -> list[str]:
        """Workspace admins and owners (people, not bots): the last resort for a review
        request no one else could be sent. Raises the classified PostError when Slack does not
        answer, so the caller can try again rather than conclude there are none."""
        found: list[str] = []
        cursor = None
        while True:
            try:
                response = await self.client.users_list(limit=200, cursor=cursor)
            except SLACK_FAILURES as error:
                refused = token_refusal(error, "users.list")
                if refused is not None:
                    raise refused from error
                refusal = classify(error, "users.list", "-")
                log.error("users.list failed: %s", refusal)
                raise refusal from error
            for member in response.get("members") or []:
                if member.get("deleted") or member.get("is_bot"):
                    continue
                if member.get("is_admin") or member.get("is_owner"):
                    found.append(str(member["id"]))
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return found

    async def dm_channel(self, user: str) -> str:
        """The app's DM channel with `user` (`conversations.open`); the user id itself, which
        Slack also delivers as a DM from the app, when that call is not available."""
        if _acting(user) in self._dms:
            return self._dms[_acting(user)]
        try:
            response = await self.client.conversations_open(users=user)
        except SLACK_FAILURES as error:
            log.info(
                "conversations.open for %s: %s", user, classify(error, "conversations.open", "-")
            )
            return user
        channel = str((response.get("channel") or {}).get("id") or user)
        self._dms[_acting(user)] = channel
        return channel

    async def check_token(self, *, scope: str | None = None) -> TokenRefusedError | None:
        """Ask Slack whether it takes the bot token (`auth.test`; with OAuth installs, the token
        of the workspace the call is made for): its refusal, or None when it does (the bot's
        identity is then known, one workspace's). With `scope` (what a `missing_scope` named),
        the token must also be granted it: `auth.test` needs no scope, so it answers a token
        lacking one, but names the token's scopes in its `x-oauth-scopes` header (without that
        header, `auth.test`'s word is taken). Raises the classified PostError when Slack cannot
        be reached or does not answer in time: that is no refusal."""
        try:
            auth = await asyncio.wait_for(self.client.auth_test(), timeout=self.lookup_s)
        except SLACK_FAILURES as error:
            refused = token_refusal(error, "auth.test")
            if refused is not None:
                return refused
            raise classify(error, "auth.test", "-") from error
        if scope is not None and not _grants(getattr(auth, "headers", None), scope):
            return TokenRefusedError(
                f"Slack does not grant the bot token the `{scope}` scope (auth.test)",
                code="missing_scope",
                needed=scope,
            )
        self._teams[_acting("")] = _team_of(auth) or self._teams.get(_acting(""))
        if ACTING_FOR.get() is not None:
            return None  # one workspace's probe (OAuth installs): not the process's identity
        self._bot = (auth.get("user_id"), str(auth.get("user") or "debatebot"))
        if auth.get("team_id"):
            self._workspace = Workspace(
                team_id=str(auth["team_id"]),
                enterprise_id=str(auth["enterprise_id"]) if auth.get("enterprise_id") else None,
            )
        return None

    def known_workspace(self) -> Workspace | None:
        """The token's workspace if an `auth.test` has answered (never a call to Slack)."""
        return self._workspace

    async def recipient_team(self) -> str | None:
        """The team a stream's recipient belongs to (`recipient_team_id`): the workspace the
        bot is installed in (`auth.test`, asked once), else its organization, in the order
        Bolt's `say_stream` takes them. Raises the classified PostError (or the token's
        refusal) when Slack does not answer: the stream waits, it is not refused."""
        if self._teams.get(_acting("")) is None:
            try:
                auth = await asyncio.wait_for(self.client.auth_test(), timeout=self.lookup_s)
            except SLACK_FAILURES as error:
                refused = token_refusal(error, "auth.test")
                if refused is not None:
                    raise refused from error
                raise classify(error, "auth.test", "-") from error
            self._bot = (auth.get("user_id"), str(auth.get("user") or "debatebot"))
            self._teams[_acting("")] = _team_of(auth)
        return self._teams[_acting("")]

    async def bot_replies(self, channel: str, thread_ts: str) -> list[str]:
        """The ts of the bot's own replies in a thread (`conversations.replies`, up to 1,000
        replies), oldest first: where a reply the bot sent but never heard back about may be.
        Raises the classified PostError when Slack does not answer or refuses."""
        bot_user, _ = await self.bot_identity()
        found: list[str] = []
        cursor: str | None = None
        for _page in range(5):
            try:
                response = await asyncio.wait_for(
                    self.client.conversations_replies(
                        channel=channel, ts=thread_ts, limit=200, cursor=cursor
                    ),
                    timeout=self.lookup_s,
                )
            except SLACK_FAILURES as error:
                refused = token_refusal(error, "conversations.replies")
                if refused is not None:
                    raise refused from error
                raise classify(error, "conversations.replies", channel) from error
            for message in response.get("messages") or []:
                ts = str(message.get("ts") or "")
                if ts != thread_ts and bot_user is not None and message.get("user") == bot_user:
                    found.append(ts)
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        return found

    def known_bot_user(self) -> str | None:
        """The bot's user id if an `auth.test` has answered (never a call to Slack)."""
        return self._bot[0] if self._bot is not None else None

    async def bot_identity(self) -> tuple[str | None, str]:
        """The bot's user id and name, for telling people how to `/invite` it."""
        if self._bot is None:
            try:
                auth = await self.client.auth_test()
            except SLACK_FAILURES as error:
                log.error("auth.test failed: %s", classify(error, "auth.test", "-"))
                return None, "debatebot"
            self._bot = (auth.get("user_id"), str(auth.get("user") or "debatebot"))
        return self._bot

    async def cannot_post_in(self, channel: str) -> str | None:
        """Why the bot cannot post in `channel` (`not_in_channel`, `channel_not_found`,
        `is_archived`), or None when it can, or when Slack cannot tell right now (the post
        itself will find out, and the outbox deals with it). The wait is short: every new
        question waits on it before it is queued."""
        try:
            response = await asyncio.wait_for(
                self.client.conversations_info(channel=channel), timeout=self.lookup_s
            )
        except SLACK_FAILURES as error:
            refusal = classify(error, "conversations.info", channel)
            if refusal.code == "channel_not_found":
                return "channel_not_found"
            log.warning("conversations.info for %s did not answer: %s", channel, refusal)
            return None
        info = response.get("channel") or {}
        if info.get("is_archived"):
            return "is_archived"
        if info.get("is_im") or info.get("is_member", True):
            return None
        return "not_in_channel"


def _acting(key: str) -> tuple[str, str]:
    """A cache key of the workspace the calls are made for (none with one workspace)."""
    workspace = ACTING_FOR.get()
    return (workspace.team_id if workspace is not None else "", key)


SCOPES_HEADER = "x-oauth-scopes"
"""The response header in which Slack names the scopes the call's token was granted."""


def _grants(headers: Any, scope: str) -> bool:
    """Whether the scopes a response's headers name include `scope` (Slack's `needed` may name
    several, comma-separated: any of them will do), or the headers name none (nothing to go
    by)."""
    if not hasattr(headers, "items"):
        return True
    named = next((str(v) for k, v in headers.items() if str(k).lower() == SCOPES_HEADER), None)
    if named is None:
        return True
    granted = {s.strip() for s in named.split(",")}
    needed = [s.strip() for s in scope.split(",") if s.strip()]
    return not needed or any(s in granted for s in needed)


def _team_of(auth: Any) -> str | None:
    """The team id in an `auth.test` answer, else the enterprise's (Bolt's order)."""
    team = auth.get("team_id") or auth.get("enterprise_id")
    return str(team) if team else None
