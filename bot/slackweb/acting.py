"""The workspace a Slack call is made for, and the client that makes it with that workspace's
bot token (OAuth installs: each workspace has its own)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.poster import MeteredWebClient
from bot.slackweb.rotation import BotTokens
from bot.store.tenancy import Workspace

ACTING_FOR: ContextVar[Workspace | None] = ContextVar("debatebot_acting_for", default=None)


@contextlib.contextmanager
def acting_for(workspace: Workspace) -> Iterator[None]:
    """Make the Slack calls of this task (and the tasks it starts) for `workspace`."""
    reset = ACTING_FOR.set(workspace)
    try:
        yield
    finally:
        ACTING_FOR.reset(reset)


class WorkspaceClient(MeteredWebClient):
    """A Web API client with no token of its own: each call carries the bot token of the
    workspace it is made for (`acting_for`), renewed when due (`BotTokens`). A call made for no
    workspace is a bug and is refused; a workspace with no bot (uninstalled, revoked) is
    refused as Slack refuses a revoked token, and one whose token expired and could not be
    renewed as Slack refuses an expired one (`TokenRefusedError` both)."""

    def __init__(self, *, tokens: BotTokens, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tokens = tokens

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        workspace = ACTING_FOR.get()
        if workspace is None:
            raise RuntimeError(f"{api_method} was called for no workspace (acting_for)")
        bot = await self.tokens.bot(
            enterprise_id=workspace.enterprise_id,
            team_id=workspace.team_id,
            is_enterprise_install=None,
        )
        if bot is None:
            raise TokenRefusedError(
                f"workspace {workspace.team_id} has no installed bot (uninstalled, or its token"
                " revoked): install the app there again (/slack/install)",
                code="token_revoked",
            )
        # slack_sdk takes a `token` parameter in place of the client's own (`_build_req_args`).
        kwargs["params"] = {**(kwargs.get("params") or {}), "token": bot.bot_token}
        return await super().api_call(api_method, **kwargs)
