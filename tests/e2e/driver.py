"""Sends Slack's requests to the bot's real HTTP endpoint, signed as Slack signs them (v0 HMAC),
or deliberately forged or stale."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp

from bot.store.tenancy import Workspace

TEAM = "T1"
"""The workspace every request of the driver comes from."""
WORKSPACE = Workspace(team_id=TEAM, with_pending=True)
"""As the bot serves it: one workspace, the rows still waiting for its id included."""
SLACK_ACK_S = 3.0
"""Slack counts an event delivery unanswered after this long, and sends it again."""
SLACK_RETRIES = 3
"""How many times Slack sends an unacknowledged event again."""


@dataclass
class Reply:
    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class SlackDriver:
    bot_url: str
    signing_secret: str
    response_base: str
    session: aiohttp.ClientSession
    team: str = TEAM
    """The workspace the driver's requests come from."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def sign(self, body: str, timestamp: int) -> str:
        base = f"v0:{timestamp}:{body}".encode()
        return "v0=" + hmac.new(self.signing_secret.encode(), base, hashlib.sha256).hexdigest()

    async def send(
        self,
        body: str,
        content_type: str,
        *,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        ts = int(time.time()) if timestamp is None else timestamp
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": signature or self.sign(body, ts),
            **(headers or {}),
        }
        async with self.session.post(f"{self.bot_url}/slack/events", data=body, headers=sent) as r:
            return Reply(r.status, await r.text())

    def command_body(self, text: str, *, user: str = "UALICE", channel: str = "CDEBATE") -> str:
        n = next(self._ids)
        return urlencode(
            {
                "token": "unused",
                "team_id": self.team,
                "team_domain": "emulated",
                "channel_id": channel,
                "channel_name": "decisions",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/debate",
                "text": text,
                "api_app_id": "A1",
                "response_url": f"{self.response_base}/cmd-{n}",
                "trigger_id": f"trigger.{n}.{time.time_ns()}",
            }
        )

    async def command(self, text: str, **kwargs: Any) -> Reply:
        return await self.send(
            self.command_body(text, **kwargs), "application/x-www-form-urlencoded"
        )

    async def event(
        self, event: dict[str, Any], *, event_id: str | None = None, retry_num: int | None = None
    ) -> Reply:
        body = json.dumps(
            {
                "token": "unused",
                "team_id": self.team,
                "api_app_id": "A1",
                "type": "event_callback",
                "event_id": event_id or f"Ev{next(self._ids):08d}",
                "event_time": int(time.time()),
                "event": event,
            }
        )
        headers = {}
        if retry_num is not None:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        return await self.send(body, "application/json", headers=headers)

    async def deliver(
        self,
        event: dict[str, Any],
        *,
        between: Callable[[int], Awaitable[None]] | None = None,
    ) -> list[Reply]:
        """Deliver `event` as Slack's Events API does: once, then again, with
        `X-Slack-Retry-Num` 1 to 3, for as long as the bot has not acknowledged it (a 200
        within three seconds). `between(n)` runs before the nth resend, standing for Slack's
        wait (none, a minute, five minutes). Returns every reply, in order."""
        event_id = f"Ev{next(self._ids):08d}"
        replies: list[Reply] = []
        for retry in range(SLACK_RETRIES + 1):
            if retry and between is not None:
                await between(retry)
            began = time.monotonic()
            reply = await self.event(event, event_id=event_id, retry_num=retry or None)
            replies.append(reply)
            if reply.status == 200 and time.monotonic() - began < SLACK_ACK_S:
                break
        return replies

    async def health(self) -> tuple[int, Any]:
        """`GET /healthz`: its status and its report."""
        async with self.session.get(f"{self.bot_url}/healthz") as r:
            return r.status, await r.json()

    async def assistant_opened(self, *, channel: str, thread_ts: str, user: str) -> Reply:
        """The person opened the assistant pane: Slack's `assistant_thread_started`."""
        return await self.event(
            {
                "type": "assistant_thread_started",
                "assistant_thread": {
                    "user_id": user,
                    "context": {"channel_id": "CDEBATE", "team_id": self.team},
                    "channel_id": channel,
                    "thread_ts": thread_ts,
                },
                "event_ts": thread_ts,
            }
        )

    async def assistant_message(
        self, text: str, *, channel: str, thread_ts: str, ts: str, user: str
    ) -> Reply:
        """A message the person typed in the assistant thread (an `im` message in a thread)."""
        return await self.event(
            {
                "type": "message",
                "channel": channel,
                "channel_type": "im",
                "user": user,
                "text": text,
                "ts": ts,
                "thread_ts": thread_ts,
                "event_ts": ts,
            }
        )

    async def messages_tab_opened(self, *, channel: str, user: str) -> Reply:
        """The person opened the app's Messages tab (`agent_view`: `app_home_opened`)."""
        return await self.event(
            {
                "type": "app_home_opened",
                "user": user,
                "channel": channel,
                "tab": "messages",
                "event_ts": "1.0",
            }
        )

    async def dm_message(self, text: str, *, channel: str, ts: str, user: str) -> Reply:
        """A top-level message the person wrote in the Messages tab (`agent_view`)."""
        return await self.event(
            {
                "type": "message",
                "channel": channel,
                "channel_type": "im",
                "user": user,
                "text": text,
                "ts": ts,
                "event_ts": ts,
            }
        )

    async def context_changed(self, *, user: str, channel: str) -> Reply:
        """What the person views beside the agent changed (`app_context_changed`)."""
        entity = {"type": "slack#/types/channel_id", "value": channel, "team_id": self.team}
        return await self.event(
            {"type": "app_context_changed", "user": user, "context": {"entities": [entity]}}
        )

    async def interaction(self, payload: dict[str, Any]) -> Reply:
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send(body, "application/x-www-form-urlencoded")

    async def click(
        self, message: dict[str, Any], action_id: str, *, user: str, channel: str = "CDEBATE"
    ) -> Reply:
        """Press the button `action_id` on a posted message, as Slack sends it."""
        actions = next(b for b in message["blocks"] if b["type"] == "actions")
        button = next(e for e in actions["elements"] if e["action_id"] == action_id)
        action = {**button, "block_id": actions.get("block_id", "b")}
        return await self.block_action(message, action, user=user, channel=channel)

    async def block_action(
        self, message: dict[str, Any], action: dict[str, Any], *, user: str, channel: str
    ) -> Reply:
        """A `block_actions` payload for `action` on `message`, as Slack sends it."""
        return await self.interaction(
            {
                "type": "block_actions",
                "team": {"id": self.team},
                "user": {"id": user},
                "api_app_id": "A1",
                "trigger_id": f"trigger.{next(self._ids)}",
                "channel": {"id": channel},
                "container": {"type": "message", "message_ts": message["ts"]},
                "message": message,
                "response_url": f"{self.response_base}/act-{next(self._ids)}",
                "actions": [{**action, "action_ts": str(time.time())}],
            }
        )

    async def home_click(self, view: dict[str, Any], action_id: str, *, user: str) -> Reply:
        """Press the button `action_id` on a published App Home `view`, as Slack sends it (a
        view container, no channel)."""
        actions = [b for b in view["blocks"] if b["type"] == "actions"]
        block = next(b for b in actions if any(e["action_id"] == action_id for e in b["elements"]))
        button = next(e for e in block["elements"] if e["action_id"] == action_id)
        return await self.interaction(
            {
                "type": "block_actions",
                "team": {"id": self.team},
                "user": {"id": user},
                "api_app_id": "A1",
                "trigger_id": f"trigger.{next(self._ids)}",
                "container": {"type": "view", "view_id": "VHOME"},
                "view": {**view, "id": "VHOME", "type": "home"},
                "actions": [
                    {
                        **button,
                        "block_id": block.get("block_id", "b"),
                        "action_ts": str(time.time()),
                    }
                ],
            }
        )

    async def feedback(
        self,
        message: dict[str, Any],
        positive: bool,
        *,
        user: str,
        channel: str = "CDEBATE",
        value: str | None = None,
    ) -> Reply:
        """Press the thumbs up (or down) of a message's feedback buttons, as Slack sends it;
        `value` replaces the button's value (a forged click)."""
        row = next(b for b in message["blocks"] if b["type"] == "context_actions")
        element = next(e for e in row["elements"] if e["type"] == "feedback_buttons")
        button = element["positive_button" if positive else "negative_button"]
        action = {
            "type": "feedback_buttons",
            "action_id": element["action_id"],
            "block_id": row.get("block_id", "fb"),
            "value": value if value is not None else button["value"],
        }
        return await self.block_action(message, action, user=user, channel=channel)

    async def submit(
        self, view: dict[str, Any], values: dict[str, dict[str, Any]], *, user: str
    ) -> Reply:
        """Submit a modal the bot opened, with `values` as {block_id: action state}."""
        state = {"values": {block: {"value": action} for block, action in values.items()}}
        return await self.interaction(
            {
                "type": "view_submission",
                "team": {"id": self.team},
                "user": {"id": user},
                "api_app_id": "A1",
                "trigger_id": f"trigger.{next(self._ids)}",
                "view": {**view, "state": state, "hash": "h"},
            }
        )
