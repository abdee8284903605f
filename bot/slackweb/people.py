"""Who may do what, and where the bot may post: reviewers (users or user groups), channel
owners, workspace admins, the bot's membership of a channel, its team (a stream's recipient's)
and its own messages in a thread or a channel.

Answers come from Slack (`users.info`, `users.list`, `usergroups.users.list`,
`users.conversations`, `conversations.info`, `conversations.replies`, `conversations.history`,
`auth.test`). Admin status and user groups' members are cached for a minute, the bot's identity
(per workspace), team and DM channels for the process, so a burst of clicks does not hit Slack's
rate limits; the others are asked each time. A lookup Slack cannot answer is logged and treated
as "no" (or, for membership, "unknown"), never as a crash, except the list of admins and the
bot's own messages, whose failure is raised so the caller retries instead of concluding there
are none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slackweb.acting import ACTING_FOR
from bot.slackweb.errors import PostError, TokenRefusedError
from bot.slackweb.poster import SLACK_FAILURES, classify, token_refusal
from bot.store.tenancy import Workspace

log = logging.getLogger(__name__)

V = TypeVar("V")

LOOKUP_PAGES = 5
"""Pages `bot_messages` reads at most: within its window, the bot's message is on the first."""


@dataclass(frozen=True)
class BotMessages:
    """The bot's messages a lookup found, oldest first: (ts, metadata or None); `complete`:
    every page of the window was read."""

    messages: list[tuple[str, dict[str, Any] | None]]
    complete: bool


class _Expiring(Generic[V]):
    """Answers kept for `ttl_s` seconds of `clock`, by (workspace, id)."""

    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._kept: dict[tuple[str, str], tuple[float, V]] = {}

    def get(self, key: tuple[str, str]) -> V | None:
        """The kept answer, or None when there is none or it is older than `ttl_s`."""
        kept = self._kept.get(key)
        return kept[1] if kept and kept[0] > self._clock() else None

    def put(self, key: tuple[str, str], value: V) -> None:
        self._kept[key] = (self._clock() + self.ttl_s, value)


async def _cached_answer(
    kept: _Expiring[V],
    about: str,
    method: str,
    ask: Callable[[], Awaitable[AsyncSlackResponse]],
    *,
    read: Callable[[AsyncSlackResponse], V],
    failed: V,
) -> V:
    """The answer `kept` holds about `about` in the acting workspace, else Slack's (`ask`, read
    by `read`), kept; when Slack does not answer, the failure is logged and `failed` is the
    answer, not kept, so the next lookup asks again."""
    key = _acting(about)
    cached = kept.get(key)
    if cached is not None:
        return cached
    try:
        response = await ask()
    except SLACK_FAILURES as error:
        log.error("%s for %s failed: %s", method, about, classify(error, method, "-"))
        return failed
    answer = read(response)
    kept.put(key, answer)
    return answer


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
        self.lookup_s = lookup_s
        self._clock = clock
        # Keyed by the workspace the calls are made for as well (bot.slackweb.acting): one
        # directory serves the delivery loop of every workspace, and on Enterprise Grid a person
        # is an admin, and has a DM channel, per workspace.
        self._admins: _Expiring[bool] = _Expiring(ttl_s, clock)
        self._groups: _Expiring[frozenset[str]] = _Expiring(ttl_s, clock)
        self._bots: dict[tuple[str, str], tuple[str | None, str]] = {}
        """The bot's user id and name in each workspace (each install has a bot user of its
        own)."""
        self._workspace: Workspace | None = None
        self._dms: dict[tuple[str, str], str] = {}
        self._teams: dict[tuple[str, str], str | None] = {}

    async def is_admin(self, user: str) -> bool:
        """Workspace admins and owners may change any channel's settings and decide reviews
        in channels without reviewers."""

        def admin(info: AsyncSlackResponse) -> bool:
            profile = info.get("user") or {}
            return bool(profile.get("is_admin") or profile.get("is_owner"))

        return await _cached_answer(
            self._admins,
            user,
            "users.info",
            lambda: self.client.users_info(user=user),
            read=admin,
            failed=False,
        )

    async def group_members(self, group: str) -> frozenset[str]:
        return await _cached_answer(
            self._groups,
            group,
            "usergroups.users.list",
            lambda: self.client.usergroups_users_list(usergroup=group),
            read=lambda response: frozenset(response.get("users") or []),
            failed=frozenset(),
        )

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
        self._bots[_acting("")] = _identity(auth)
        if ACTING_FOR.get() is not None:
            return None  # one workspace's probe (OAuth installs): not the process's workspace
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
            self._bots[_acting("")] = _identity(auth)
            self._teams[_acting("")] = _team_of(auth)
        return self._teams[_acting("")]

    async def bot_messages(
        self,
        channel: str,
        *,
        thread_ts: str | None = None,
        oldest: str | None = None,
        latest: str | None = None,
    ) -> BotMessages:
        """The bot's own messages in a thread (`conversations.replies`, the root left out) or,
        without `thread_ts`, at the top of `channel` (`conversations.history`), between `oldest`
        and `latest` when given, oldest first, each with its metadata: where a message the bot
        sent but never heard back about may be. At most `LOOKUP_PAGES` pages are read.

        Both methods page by cursor (`response_metadata.next_cursor`, empty on the last page),
        and return metadata only when asked (`include_all_metadata`). Apps outside the Slack
        Marketplace get at most 15 messages a page and one call a minute (since 2025-05-29,
        and for their older installs since 2026-03-03; others: Tier 3, 50+ a minute), so the
        window `oldest`..`latest` keeps a lookup to a page. Raises the token's refusal, or the
        classified PostError (a 429 with its Retry-After, a 5xx, `not_in_channel`,
        `channel_not_found`, `thread_not_found`, ...) when Slack refuses or does not answer."""
        bot_user, _ = await self.bot_identity()
        method = "conversations.replies" if thread_ts else "conversations.history"
        if bot_user is None:
            raise PostError(
                f"{method} in {channel}: the bot's own user id is not known yet (auth.test did"
                " not answer)",
                code="unreachable",
                retryable=True,
            )
        params: dict[str, Any] = {
            "channel": channel,
            "limit": 200,
            "include_all_metadata": True,
            "oldest": oldest,
            "latest": latest,
            "inclusive": True,
        }
        found: list[tuple[str, dict[str, Any] | None]] = []
        cursor: str | None = None
        for _page in range(LOOKUP_PAGES):
            call = (
                self.client.conversations_replies(ts=thread_ts, cursor=cursor, **params)
                if thread_ts
                else self.client.conversations_history(cursor=cursor, **params)
            )
            try:
                response = await asyncio.wait_for(call, timeout=self.lookup_s)
            except SLACK_FAILURES as error:
                refused = token_refusal(error, method)
                if refused is not None:
                    raise refused from error
                raise classify(error, method, channel) from error
            for message in response.get("messages") or []:
                ts = str(message.get("ts") or "")
                if ts != thread_ts and message.get("user") == bot_user:
                    metadata = message.get("metadata")
                    found.append((ts, metadata if isinstance(metadata, dict) else None))
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        found.sort(key=lambda item: _ts_order(item[0]))
        return BotMessages(messages=found, complete=cursor is None)

    def known_bot_user(self) -> str | None:
        """The bot's user id if an `auth.test` has answered (never a call to Slack)."""
        known = self._bots.get(_acting(""))
        return known[0] if known is not None else None

    async def bot_identity(self) -> tuple[str | None, str]:
        """The bot's user id and name (in the workspace the calls are made for), for telling
        people how to `/invite` it and for finding its own messages."""
        if _acting("") not in self._bots:
            try:
                auth = await self.client.auth_test()
            except SLACK_FAILURES as error:
                log.error("auth.test failed: %s", classify(error, "auth.test", "-"))
                return None, "debatebot"
            self._bots[_acting("")] = _identity(auth)
        return self._bots[_acting("")]

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


def _identity(auth: Any) -> tuple[str | None, str]:
    """The bot's user id and name in an `auth.test` answer."""
    user = auth.get("user_id")
    return (str(user) if user else None), str(auth.get("user") or "debatebot")


def _ts_order(ts: str) -> tuple[int, int]:
    """A message ts (`1700000000.000100`) as numbers, in Slack's order."""
    seconds, _, fraction = ts.partition(".")
    return (int(seconds or 0), int(fraction.ljust(6, "0")[:6] or 0))


def _team_of(auth: Any) -> str | None:
    """The team id in an `auth.test` answer, else the enterprise's (Bolt's order)."""
    team = auth.get("team_id") or auth.get("enterprise_id")
    return str(team) if team else None
