"""The bot token of a workspace, renewed when token rotation says it is due."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackClientError, SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator

from bot.outbound import OutboundError
from bot.slackweb.errors import TokenRefusedError
from bot.store.installations import key

log = logging.getLogger(__name__)
Find = Callable[[], Awaitable[Bot | None]]

ROTATE_BEFORE_MIN = 120
"""Renew a rotating token this many minutes before it expires: Bolt's default
(`token_rotation_expiration_minutes`). Slack's rotating tokens last 12 hours."""
TRANSIENT = {
    "internal_error",
    "fatal_error",
    "ratelimited",
    "service_unavailable",
    "request_timeout",
}
"""Slack's answers that say it could not do the renewal now, not that it refuses it."""


class BotTokens:
    """The bot a request from a workspace acts with, its token renewed when due.

    With token rotation on, Slack's tokens expire after 12 hours and are renewed with
    `oauth.v2.access` (`grant_type=refresh_token`), which answers a new token and a new refresh
    token; the one used "is then revoked" (Slack, *Using token rotation*). Renewal follows
    Bolt's rule, `ROTATE_BEFORE_MIN` minutes ahead, through slack_sdk's `AsyncTokenRotator`, and
    the new pair is saved before it is used. One task per process renews an install at a time
    (the others wait and read what it saved). When Slack refuses the refresh token because
    another replica just spent it, the install is read again and that replica's token used;
    when it refuses it for good, the token is refused as Slack refuses an expired one
    (`TokenRefusedError`, `token_expired`). When Slack cannot be reached (or its answer is a
    redirect, never followed), a token that has not yet expired is used as it is and renewed at
    a later request with the same refresh token; one that has is a call Slack did not answer
    (`SlackClientError`: retried, no refusal).
    """

    def __init__(
        self,
        *,
        store: AsyncInstallationStore,
        rotator: AsyncTokenRotator,
        rotate_before_min: int = ROTATE_BEFORE_MIN,
    ) -> None:
        self.store = store
        self.rotator = rotator
        self.rotate_before_min = rotate_before_min
        self._locks: dict[str, asyncio.Lock] = {}

    async def bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
    ) -> Bot | None:
        """The bot to act with, or None: not installed (or uninstalled, its tokens deleted).
        Raises TokenRefusedError when its token expired and Slack refused to renew it, and
        SlackClientError when it expired and Slack could not be asked (both logged)."""

        async def find() -> Bot | None:
            return await self.store.async_find_bot(
                enterprise_id=enterprise_id,
                team_id=team_id,
                is_enterprise_install=is_enterprise_install,
            )

        bot = await find()
        if bot is None or not self._due(bot):
            return bot
        where = key(enterprise_id=bot.enterprise_id, team_id=bot.team_id)
        async with self._locks.setdefault(where, asyncio.Lock()):
            bot = await find()
            if bot is None or not self._due(bot):
                return bot
            return await self._renew(bot, where, find)

    def _due(self, bot: Bot) -> bool:
        expires_at = bot.bot_token_expires_at
        return (
            bot.bot_refresh_token is not None
            and expires_at is not None
            and expires_at <= time.time() + self.rotate_before_min * 60
        )

    async def _renew(self, bot: Bot, where: str, find: Find) -> Bot | None:
        try:
            renewed = await self.rotator.perform_bot_token_rotation(
                bot=bot, minutes_before_expiration=self.rotate_before_min
            )
        except SlackTokenRotationError as error:
            answer = error.api_error.response
            code = str(answer.get("error"))
            if answer.status_code >= 500 or answer.status_code == 429 or code in TRANSIENT:
                return self._unrenewed(bot, where, code)
            again = await find()
            if again is not None and again.bot_refresh_token != bot.bot_refresh_token:
                return again  # another replica renewed it first
            log.error(
                "Slack refused to renew the bot token of %s (%s): install the app in that"
                " workspace again (/slack/install)",
                where,
                code,
            )
            raise TokenRefusedError(
                f"the bot token of {where} expired and Slack refused to renew it ({code}):"
                " install the app in that workspace again (/slack/install)",
                code="token_expired",
            ) from error
        except (SlackClientError, aiohttp.ClientError, OutboundError, TimeoutError) as error:
            # Not asked, or no answer (OutboundError: a redirect the session refused, so the
            # refresh token was sent nowhere else): the stored pair is kept as it is.
            return self._unrenewed(bot, where, str(error) or type(error).__name__)
        if renewed is None:
            return bot
        await self.store.async_save_bot(renewed)
        log.info("renewed the bot token of %s (token rotation)", where)
        return renewed

    @staticmethod
    def _unrenewed(bot: Bot, where: str, why: str) -> Bot:
        """Slack could not be asked to renew the token: use it while it has not expired."""
        if (bot.bot_token_expires_at or 0) > time.time():
            log.warning(
                "could not renew the bot token of %s (%s); using it until it expires", where, why
            )
            return bot
        log.error("the bot token of %s expired and could not be renewed yet (%s)", where, why)
        raise SlackClientError(
            f"the bot token of {where} expired and Slack could not be asked to renew it ({why})"
        )
