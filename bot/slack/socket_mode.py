"""Socket Mode that gives up on a token Slack refuses, instead of retrying it forever.

slack_sdk's aiohttp client retries `apps.connections.open` every ping interval whatever the
error, so a revoked or mistyped `xapp-` token leaves `serve` alive, deaf, and logging every ten
seconds. Here an error that no retry can fix ends the connection and reports it, so `serve`
stops with a message that says which token to replace.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

FATAL_TOKEN_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "not_allowed_token_type",
        "token_revoked",
        "token_expired",
        "account_inactive",
        "no_permission",
        "missing_scope",
    }
)


log = logging.getLogger(__name__)


class GuardedSocketModeClient(SocketModeClient):
    """The aiohttp Socket Mode client, closed for good (and `refused` set) on a fatal token
    error from `apps.connections.open`, and deaf to frames that are not JSON objects.

    Socket Mode has no request signature: the connection itself is authenticated (only the
    app-level token can open it), so a frame arrives authenticated before it is parsed. A frame
    that still cannot be parsed (nested past Python's recursion limit) is dropped with one
    warning instead of slack_sdk's traceback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused = asyncio.Event()
        self.refusal = ""
        self._listener_tasks: set[asyncio.Future[None]] = set()

    async def process_message(self) -> None:
        raw = await self.message_queue.get()
        if raw is None:
            return
        message: Any = {}
        if raw.startswith("{"):
            try:
                message = json.loads(raw)
            except (ValueError, RecursionError) as error:
                why = "nested too deeply" if isinstance(error, RecursionError) else "not JSON"
                log.warning("dropped a Socket Mode frame of %d characters: %s", len(raw), why)
                return
        if not isinstance(message, dict):
            log.warning("dropped a Socket Mode frame that is not a JSON object")
            return
        # As slack_sdk does: the listeners run in their own task, so one slow request does not
        # hold up the frames behind it.
        task = asyncio.ensure_future(self.run_message_listeners(message, raw))
        self._listener_tasks.add(task)
        task.add_done_callback(self._listener_tasks.discard)

    async def issue_new_wss_url(self) -> str:
        try:
            return await super().issue_new_wss_url()
        except SlackApiError as error:
            data = getattr(error.response, "data", None)
            code = data.get("error") if isinstance(data, dict) else None
            if code in FATAL_TOKEN_ERRORS:
                self.refusal = str(code)
                # The connect loop returns instead of retrying once the client is closed.
                self.closed = True
                self.refused.set()
            raise


class GuardedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler on the guarded client. Bolt's own constructor is not called:
    it would open a second aiohttp session for a client that is never used."""

    def __init__(self, app: AsyncApp, app_token: str, *, ping_interval_s: float = 10.0) -> None:
        self.app = app
        self.app_token = app_token
        self.client = GuardedSocketModeClient(
            app_token=app_token,
            logger=app.logger,
            web_client=app.client,
            ping_interval=ping_interval_s,
        )
        self.client.socket_mode_request_listeners.append(self._listen)

    async def _listen(self, client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        """Bolt's `handle`, for the listener type slack_sdk declares: the client calling is the
        guarded one this handler made (Bolt's `handle` is annotated for that narrower type)."""
        assert isinstance(client, SocketModeClient)
        await self.handle(client, request)

    @property
    def guarded(self) -> GuardedSocketModeClient:
        assert isinstance(self.client, GuardedSocketModeClient)
        return self.client
