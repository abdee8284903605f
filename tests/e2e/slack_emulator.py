"""A Slack Web API emulator: a real HTTP server on 127.0.0.1 that the real `slack_sdk` client is
pointed at with `base_url`.

It implements the methods the bot calls with Slack's response shapes, enforces the limits Slack
enforces (50 blocks a message, 3,000 characters a section, 100 blocks a view, 24-character modal
titles), records every call, serves `response_url` posts, and can be told to answer a method with
429 + Retry-After or with an error.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

BOT_USER = "UBOT"
BOT_ID = "BBOT"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    status: int = 200


@dataclass
class Fault:
    status: int = 200
    error: str | None = None
    retry_after: float | None = None


@dataclass
class SlackEmulator:
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ephemeral: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)
    admins: set[str] = field(default_factory=set)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    user_channels: dict[str, list[str]] = field(default_factory=dict)
    faults: dict[str, list[Fault | None]] = field(default_factory=dict)
    url: str = ""
    _runner: web.AppRunner | None = None
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # --- control ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=10 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response_url)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def fail(self, method: str, *faults: Fault | None) -> None:
        """Answer the next calls of `method` with these faults, in order (None: answer normally)."""
        self.faults.setdefault(method, []).extend(faults)

    def next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.{next(self._ts):06d}"

    def seed_message(
        self, channel: str, text: str, *, user: str = "UALICE", thread_ts: str | None = None
    ) -> str:
        ts = self.next_ts()
        message = {"type": "message", "user": user, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        self.messages.setdefault(channel, []).append(message)
        return ts

    def calls_of(self, method: str, *, ok_only: bool = True) -> list[Call]:
        return [c for c in self.calls if c.method == method and (c.status == 200 or not ok_only)]

    def posted(self, channel: str) -> list[dict[str, Any]]:
        """The bot's messages in `channel` (top level and threads), in posting order."""
        return [m for m in self.messages.get(channel, []) if m.get("user") == BOT_USER]

    def in_thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        return [m for m in self.posted(channel) if m.get("thread_ts") == thread_ts]

    # --- HTTP ------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST":
            raw = await request.text()
            if request.content_type == "application/json" and raw:
                params.update(json.loads(raw))
            elif raw:
                params.update(dict(parse_qsl(raw, keep_blank_values=True)))
        for key in ("blocks", "view"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        return params

    async def _response_url(self, request: web.Request) -> web.Response:
        self.responses.append(await request.json())
        return web.json_response({"ok": True})

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        call = Call(method, params, time.monotonic())
        self.calls.append(call)
        if not request.headers.get("Authorization", "").startswith("Bearer xoxb-"):
            return web.json_response({"ok": False, "error": "not_authed"})
        queued = self.faults.get(method)
        fault = queued.pop(0) if queued else None
        if fault is not None:
            call.status = fault.status
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(int(fault.retry_after))
            error = fault.error or ("ratelimited" if fault.status == 429 else "internal_error")
            return web.json_response(
                {"ok": False, "error": error}, status=fault.status, headers=headers
            )
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        await asyncio.sleep(0)
        body = handler(params)
        if not body.get("ok"):
            call.status = 400
        return web.json_response(body)

    # --- limits ----------------------------------------------------------------------------

    @staticmethod
    def _blocks_error(blocks: list[dict[str, Any]] | None, limit: int = 50) -> str | None:
        if not blocks:
            return None
        if len(blocks) > limit:
            return "invalid_blocks"
        for block in blocks:
            text = (block.get("text") or {}).get("text", "")
            if block.get("type") == "section" and not 0 < len(text) <= 3000:
                return "invalid_blocks"
            if block.get("type") == "header" and len(text) > 150:
                return "invalid_blocks"
            if block.get("type") == "actions" and len(block.get("elements", [])) > 25:
                return "invalid_blocks"
        return None

    # --- methods ---------------------------------------------------------------------------

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
            "team_id": "T1",
            "team": "Emulated",
            "user": "debatebot",
            "url": "https://emulated.slack.com/",
        }

    def _chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if len(params.get("text") or "") > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        error = self._blocks_error(params.get("blocks"))
        if error:
            return {"ok": False, "error": error}
        message = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "ts": self.next_ts(),
            "text": params.get("text", ""),
            "blocks": params.get("blocks") or [],
        }
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        self.messages.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": message}

    def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        error = self._blocks_error(params.get("blocks"))
        if error:
            return {"ok": False, "error": error}
        for message in self.messages.get(params.get("channel", ""), []):
            if message["ts"] == params.get("ts"):
                message["text"] = params.get("text", message["text"])
                message["blocks"] = params.get("blocks") or []
                message["edited"] = True
                return {"ok": True, "channel": params["channel"], "ts": message["ts"]}
        return {"ok": False, "error": "message_not_found"}

    def _chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        self.ephemeral.append(params)
        return {"ok": True, "message_ts": self.next_ts()}

    def _conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel_messages = self.messages.get(params.get("channel", ""), [])
        ts = params.get("ts")
        target = next((m for m in channel_messages if m["ts"] == ts), None)
        if target is None:
            return {"ok": False, "error": "thread_not_found"}
        if target.get("thread_ts") and target["thread_ts"] != ts:
            thread = [target]
        else:
            thread = [target] + [
                m for m in channel_messages if m.get("thread_ts") == ts and m["ts"] != ts
            ]
        limit = int(params.get("limit") or 1000)
        start = int(params.get("cursor") or 0)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = params.get("user", "")
        admin = user in self.admins
        return {"ok": True, "user": {"id": user, "is_admin": admin, "is_owner": False}}

    def _usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        group = params.get("usergroup", "")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": self.usergroups[group]}

    def _users_conversations(self, params: dict[str, Any]) -> dict[str, Any]:
        channels = self.user_channels.get(params.get("user", ""), [])
        return {
            "ok": True,
            "channels": [{"id": c} for c in channels],
            "response_metadata": {"next_cursor": ""},
        }

    def _views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view") or {}
        if not params.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        if len(view.get("title", {}).get("text", "")) > 24 or len(view.get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_arguments"}
        view = {**view, "id": f"V{len(self.views) + 1:05d}"}
        self.views.append(view)
        return {"ok": True, "view": view}

    def _views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view") or {}
        if len(view.get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_arguments"}
        self.published.append({"user_id": params.get("user_id"), "view": view})
        return {"ok": True, "view": view}
