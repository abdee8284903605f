"""A Slack Web API emulator: a real HTTP server on 127.0.0.1 that the real `slack_sdk` client is
pointed at with `base_url`.

It implements the methods the bot calls with Slack's response shapes, enforces the limits Slack
enforces (50 blocks a message, 3,000 characters a section, about 13,000 characters of block
text, 40,000 of `text`, 100 blocks a view, 24-character modal titles), records every call
with its answer (and its caller, for a process given an address of its own: `api_url_for`)
and counts the TCP connections it accepts, answers a method late when told to (`delays`),
serves `response_url` posts, and can fail any method the ways Slack does: an error code, a 5xx,
a 429 with Retry-After, a hang past the client's timeout, or a refusal by size, for the next N
calls or for a window of time. Channels can lose the bot (`not_in_channel`) or be archived;
messages can be deleted; a user id as channel is a DM. It also serves Socket Mode: a WebSocket
at the URL `apps.connections.open` hands out, through which tests push envelopes. A fault may
hold only for calls a predicate picks (`Fault.when`: a caller's, a text's).

A message's ts is the time it was stored, as Slack's are. A post's `metadata` ("a JSON object
with event_type and event_payload fields"; `invalid_metadata_format` else) is kept with it and
returned by `conversations.history` (a channel's top level, newest first) and
`conversations.replies` (a thread, root first) only when they are asked with
`include_all_metadata`. Both read within `oldest`..`latest` (`inclusive`), page by cursor
(`invalid_cursor` for one never handed out), hold at most `history_page_cap` messages a page (15
for an app outside the Slack Marketplace), answer `not_in_channel` in a channel the bot is not a
member of, and fail like any method (a 429 with Retry-After, a 5xx, a hang).

Uploaded files are served at their `url_private` addresses, and can be served the hostile ways a
compromised or misconfigured files API could: a download address on another host, a size in
files.info that is not the file's, a download dripped a byte at a time, cut short of the length
it claims, or redirected elsewhere.

Something between the bot and Slack that rewrites answers (a proxy, a wrong address) is played by
a redirect `Fault`: any Web API method, or a `response_url` post, answered with a 3xx pointing
at another path of this origin (`moved_url`, where whatever arrives is recorded in `moved`) or
at another origin. Slack itself documents no redirect for any of them.

Files the bot would upload take Slack's three steps: `files.getUploadURLExternal` hands out an
upload address on this emulator, the bytes are posted there (recorded in `uploads`, with the
Authorization header they came with; the address can be redirected as "files.upload"), and
`files.completeUploadExternal` shares them: with `channel_id` (and `thread_ts`) as a message of
the bot's holding the files, its text the `initial_comment`, refused where a post would be
(`not_in_channel`, `channel_not_found`, `is_archived`, a deleted thread).

With `tenancy` (slack_workspaces.py) it serves many workspaces: OAuth installs through its
authorize page and `oauth.v2.access` (with token rotation; it fails as any method can), each
workspace's own bot token, refused on another workspace's channels, a token refused or lacking a
scope with no uninstall (`x-oauth-scopes` on each answer names a token's scopes), and the events
uninstalling sends. Every call records the token it came with.

The `assistant.threads.*` methods check their arguments against `slack_sdk`'s own signatures
(every required one present, nothing it would not send), so a request the real client could not
make is refused here as Slack refuses it.

`chat.startStream`, `chat.appendStream` and `chat.stopStream` keep a streamed message and every
chunk it was sent, as Slack's reference describes them: their arguments are checked against
slack_sdk's signatures; a stream into a channel thread needs `recipient_user_id` and
`recipient_team_id` (`missing_recipient_user_id`, `missing_recipient_team_id`); each chunk must
be one slack_sdk's `Chunk` models know, with nothing they would not send (`invalid_chunks`);
`markdown_text` holds at most 12,000 characters (`msg_too_long`) and the stop's `blocks` 50; a
stream that was stopped, or that Slack closed (`close_stream`, or past `stream_lifetime_s`),
refuses appends and stops (`message_not_in_streaming_state`), a deleted one answers
`message_not_found`, and `chat.update` refuses a message still streaming
(`streaming_state_conflict`). Each can fail like any method (`fail`, `fail_for`), also after
it was carried out (`Fault.applied`: the answer lost); with `streaming=False` all three answer
`unknown_method`, as a Slack without them does.

`agents.sessions.setStatus` and `.rename` keep each thread's agent session as Slack's reference
describes them (slack_sessions.py: the four statuses, `invalid_arguments`, `not_authorized` for
an app not declared an agent, `unknown_method` without them, the missing-subscription warning
when the manifest lacks `agent_session_stopped`); `press_stop` is a person pressing the
session's Stop, which stops the bot's streams in the thread and returns the event Slack sends.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_sdk.models.messages.chunk import Chunk
from slack_sdk.web.async_client import AsyncWebClient

from tests.e2e.slack_sessions import AgentSessions
from tests.e2e.slack_workspaces import Workspaces

BOT_USER = "UBOT"
BOT_ID = "BBOT"
MAX_BLOCK_TEXT = 13_000
"""About where Slack answers `msg_blocks_too_long`."""
MAX_MARKDOWN_TEXT = 12_000
"""`markdown_text`, as a stream argument or a chunk: "Limit this field to 12,000 characters"."""
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})


def block_chars(value: Any) -> int:
    """Characters of text in blocks, counted independently of the bot's own helper."""
    if isinstance(value, list):
        return sum(block_chars(item) for item in value)
    if isinstance(value, dict):
        return sum(
            len(v) if k == "text" and isinstance(v, str) else block_chars(v)
            for k, v in value.items()
        )
    return 0


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    status: int = 200
    token: str = ""
    """The bearer token the call came with."""
    caller: str = ""
    """Who called, when each caller has an address of its own (`api_url_for`)."""
    answer: dict[str, Any] | None = None
    """What the method did, as its answer says (also when a fault `applied` answered in its
    place); None when it did nothing (a fault or `not_authed` answered)."""


@dataclass
class Fault:
    """How one call fails: HTTP `status` with Slack's `error` code (a 5xx carries its own),
    `Retry-After`, a `hang_s` before answering, or `max_chars`: refuse with `error` only a
    message whose block text is longer (a size refusal below Slack's own limit)."""

    status: int = 200
    error: str | None = None
    retry_after: float | None = None
    hang_s: float = 0.0
    max_chars: int | None = None
    html: bool = False
    """Answer with a proxy's HTML page instead of Slack's JSON."""
    drip_s: float = 0.0
    """A file download only: send the file one byte every `drip_s`."""
    cut_at: int | None = None
    """A file download only: claim the whole file's length, send its first `cut_at` bytes,
    then close the connection."""
    redirect: str = ""
    """Answer `status` (a 3xx) pointing at this address: a file download, a Web API method
    (before the token or the workspace is looked at: it is not Slack answering), or a
    `response_url` post (as the method "response_url")."""
    needed: str | None = None
    """With `missing_scope`: the scope Slack names as needed (and the token's as provided)."""
    applied: bool = False
    """Carry the call out first, then answer with the fault: Slack took it, and its answer was
    lost (with `hang_s` past the client's timeout: the call timed out)."""
    when: Callable[[Call], bool] | None = None
    """Only a call this holds for (its caller, its text...): a queued fault waits for one."""


@dataclass
class Arrival:
    """A request that reached where a redirect pointed: what a followed redirect would carry."""

    method: str
    path: str
    authorization: str
    body: bytes


@dataclass
class Window:
    fault: Fault
    until: float


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
    windows: dict[str, list[Window]] = field(default_factory=dict)
    outside: set[str] = field(default_factory=set)
    """Channels the bot is not a member of: posts there get `not_in_channel`."""
    archived: set[str] = field(default_factory=set)
    deleted: set[tuple[str, str]] = field(default_factory=set)
    removed: list[dict[str, Any]] = field(default_factory=list)
    """Messages the bot deleted (`chat.delete`)."""
    unthreaded: set[tuple[str, str]] = field(default_factory=set)
    """Threads whose replies Slack answers `ok` for but stores at the channel's top level,
    without `thread_ts` (reported of a thread whose root was just deleted)."""
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    app_token_error: str | None = None
    """When set, `apps.connections.open` answers with this error (a revoked app token)."""
    assistant: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Every accepted `assistant.threads.*` call: (method, arguments)."""
    sockets: list[web.WebSocketResponse] = field(default_factory=list)
    socket_acks: list[dict[str, Any]] = field(default_factory=list)
    socket_connections: int = 0
    transports: dict[int, Any] = field(default_factory=dict)
    files: dict[str, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    """Uploaded files: id -> (files.info's file object, content served at its url_private)."""
    downloads: list[tuple[str, str]] = field(default_factory=list)
    """Every file download: (file id, the Authorization header it came with)."""
    moved: list[Arrival] = field(default_factory=list)
    """Every request to `moved_url`, the same-origin path redirects can point at."""
    uploads: dict[str, Arrival] = field(default_factory=dict)
    """Bytes posted to an upload address files.getUploadURLExternal handed out, by file id."""
    upload_names: dict[str, str] = field(default_factory=dict)
    """The file name of each upload address handed out, by file id."""
    stream_lifetime_s: float | None = None
    """When set, Slack closes a stream this long after it started (appends then fail)."""
    streaming: bool = True
    """False: a Slack without the chat streaming methods (an older workspace, a stand-in
    without them), which answers them `unknown_method`."""
    tenancy: Workspaces | None = None
    """Many workspaces, each with its own tokens, and OAuth installs (slack_workspaces.py);
    None: one workspace, whose every `xoxb-` token is taken."""
    connections: int = 0
    """TCP connections accepted, over every path (Web API, response_url, files, socket)."""
    delays: dict[str, float] = field(default_factory=dict)
    """Seconds a method waits before it answers normally (a slow Slack, not a failure)."""
    url: str = ""
    _runner: web.AppRunner | None = None
    _last_ts: int = 0
    _speaker: str = BOT_USER
    """The bot user the call being handled posts as (with `tenancy`, its token's workspace's)."""
    agent_sessions: AgentSessions = field(default_factory=AgentSessions)
    """Every thread's agent session, and how the app stands with them (slack_sessions.py)."""
    history_page_cap: int | None = None
    """Messages a `conversations.history`/`.replies` page holds at most, whatever `limit`
    asks: 15 for an app outside the Slack Marketplace (since 2025-05-29)."""

    # --- control ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=10 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/as/{caller}/api/{method}", self._api)
        app.router.add_get("/as/{caller}/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response_url)
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/files-pri/{file_id}/{name}", self._download)
        app.router.add_get("/files-pri/{file_id}/download/{name}", self._download)
        app.router.add_get("/oauth/v2/authorize", self._authorize)
        app.router.add_route("*", "/moved/{tail:.*}", self._moved)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        # A call a test holds (a hang fault) is cut at stop after a second, not waited for
        # aiohttp's default 60 s: the bot that made it is gone by then.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        accepted = server.connection_made

        def counted(handler: Any, transport: Any) -> None:
            self.connections += 1
            accepted(handler, transport)

        server.connection_made = counted  # type: ignore[method-assign]
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

    @property
    def moved_url(self) -> str:
        """A path of this origin that is not Slack's: what a same-origin redirect points at."""
        return f"{self.url}/moved/"

    def api_url_for(self, caller: str) -> str:
        """The Web API at an address of `caller`'s own: its calls record who made them."""
        return f"{self.url}/as/{caller}/api/"

    def fail(self, method: str, *faults: Fault | None) -> None:
        """Answer the next calls of `method` with these faults, in order (None: answer normally)."""
        self.faults.setdefault(method, []).extend(faults)

    def fail_for(self, method: str, fault: Fault, seconds: float) -> None:
        """Answer every call of `method` with `fault` for the next `seconds` ("*": any method)."""
        self.windows.setdefault(method, []).append(Window(fault, time.monotonic() + seconds))

    def heal(self) -> None:
        """End every fault: queued and windowed."""
        self.faults.clear()
        self.windows.clear()

    def streams(self, channel: str) -> list[dict[str, Any]]:
        """The bot's streamed messages in `channel`, in the order they started."""
        return [
            m
            for m in self.messages.get(channel, [])
            if m.get("user") in self.bot_users() and "chunks" in m
        ]

    def close_stream(self, channel: str, ts: str) -> None:
        """Slack ends a stream on its own (it lived past its time)."""
        for message in self.messages.get(channel, []):
            if message["ts"] == ts:
                message["streaming"] = False

    @staticmethod
    def tasks(stream: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """A stream's tasks as its chunks leave them: id -> the last `task_update` fields."""
        found: dict[str, dict[str, Any]] = {}
        for chunk in stream["chunks"]:
            if chunk.get("type") == "task_update":
                found[chunk["id"]] = {**found.get(chunk["id"], {}), **chunk}
        return found

    def delete_message(self, channel: str, ts: str) -> None:
        """A person deletes a message: updates of it fail, and replies to it find no thread."""
        self.deleted.add((channel, ts))
        self.messages[channel] = [m for m in self.messages.get(channel, []) if m["ts"] != ts]

    def dms(self, user: str) -> list[dict[str, Any]]:
        """What the bot sent `user` directly."""
        return self.posted(f"D{user}")

    def _fault_for(
        self, method: str, params: dict[str, Any], call: Call | None = None
    ) -> Fault | None:
        now = time.monotonic()
        for name in (method, "*"):
            live = [w for w in self.windows.get(name, []) if w.until > now]
            self.windows[name] = live
            for window in live:
                if self._applies(window.fault, params, call):
                    return window.fault
        queued = self.faults.get(method)
        waiting = queued[0] if queued else None
        if waiting is not None and waiting.when is not None and not (call and waiting.when(call)):
            return None  # the fault waits for a call it holds for
        return queued.pop(0) if queued else None

    def _redirect_for(self, method: str) -> Fault | None:
        """The fault of `method`'s next call when it is a redirect (taken from the queue), else
        None, the fault left for `_fault_for`."""
        now = time.monotonic()
        for name in (method, "*"):
            for window in self.windows.get(name, []):
                if window.until > now and window.fault.redirect:
                    return window.fault
        queued = self.faults.get(method)
        if queued and queued[0] is not None and queued[0].redirect:
            return queued.pop(0)
        return None

    @staticmethod
    def _redirected(fault: Fault) -> web.Response:
        return web.Response(status=fault.status, headers={"Location": fault.redirect}, text="Moved")

    def _applies(self, fault: Fault, params: dict[str, Any], call: Call | None) -> bool:
        if fault.when is not None and (call is None or not fault.when(call)):
            return False
        if fault.max_chars is None:
            return True
        return block_chars(params.get("blocks") or []) > fault.max_chars

    def next_ts(self) -> str:
        """A new message's ts: the time it was stored, as Slack's are (seconds since the epoch,
        to the microsecond), unique and increasing."""
        micros = max(int(time.time() * 1_000_000), self._last_ts + 1)
        self._last_ts = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

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
        """The bot's posted messages in `channel` (top level and threads), in posting order;
        its streamed replies are `streams`."""
        return [
            m
            for m in self.messages.get(channel, [])
            if m.get("user") in self.bot_users() and "chunks" not in m
        ]

    def bot_users(self) -> set[str]:
        """The bot's user ids: one workspace's, or each workspace's with `tenancy`."""
        if self.tenancy is None:
            return {BOT_USER}
        return {BOT_USER} | {team.bot_user_id for team in self.tenancy.teams.values()}

    def in_thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        return [m for m in self.posted(channel) if m.get("thread_ts") == thread_ts]

    # --- HTTP ------------------------------------------------------------------------------

    def upload(
        self,
        name: str,
        content: bytes,
        *,
        filetype: str = "markdown",
        mode: str = "hosted",
        size: int | None = None,
        host: str | None = None,
        file_id: str | None = None,
    ) -> dict[str, Any]:
        """A file someone uploaded: the object Slack puts in the message event's `files`.
        Hostile: `size` is what files.info claims instead of the content's length, and `host`
        serves the download addresses instead of this emulator (another host)."""
        file_id = file_id or f"F{len(self.files) + 1:08d}"
        where = host or self.url
        info = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": "text/markdown" if filetype == "markdown" else "application/octet-stream",
            "filetype": filetype,
            "mode": mode,
            "size": len(content) if size is None else size,
            "url_private": f"{where}/files-pri/{file_id}/{name}",
            "url_private_download": f"{where}/files-pri/{file_id}/download/{name}",
        }
        self.files[file_id] = (info, content)
        return {"id": file_id, "name": name, "filetype": filetype, "mode": mode}

    def _files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("filename") or not str(params.get("length", "")).isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"FU{len(self.upload_names) + 1:07d}"
        self.upload_names[file_id] = str(params["filename"])
        return {"ok": True, "upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        redirect = self._redirect_for("files.upload")
        if redirect is not None:
            return self._redirected(redirect)
        if file_id not in self.upload_names:
            return web.Response(status=404, text="no such upload")
        body = await request.read()
        self.uploads[file_id] = Arrival(
            request.method, request.path_qs, request.headers.get("Authorization", ""), body
        )
        return web.Response(text=f"OK - {len(body)}")

    def _files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel_id") or "")
        thread_ts = str(params.get("thread_ts") or "")
        if channel:
            # Sharing posts in the channel as the bot: refused where a post would be.
            unreachable = self._reach(channel)
            if unreachable:
                return {"ok": False, "error": unreachable}
            if thread_ts and (channel, thread_ts) in self.deleted:
                return {"ok": False, "error": "thread_not_found"}
        shared = []
        for item in json.loads(str(params.get("files") or "[]")):
            arrived = self.uploads.get(str(item.get("id")))
            if arrived is None:
                return {"ok": False, "error": "file_not_found"}
            name = self.upload_names[item["id"]]
            shared.append(
                self.upload(name, arrived.body, file_id=item["id"])
                | {"title": item.get("title") or name}
            )
        if channel and shared:
            # "Channel ID where the file will be shared", as a reply when `thread_ts` is given,
            # introduced by `initial_comment` ("the message text introducing the file").
            message: dict[str, Any] = {
                "type": "message",
                "user": self._speaker,
                "bot_id": BOT_ID,
                "ts": self.next_ts(),
                "text": str(params.get("initial_comment") or ""),
                "blocks": [],
                "files": shared,
                "upload": True,
            }
            if thread_ts:
                message["thread_ts"] = thread_ts
            self.messages.setdefault(channel, []).append(message)
        return {"ok": True, "files": shared}

    def shared_files(self, channel: str, thread_ts: str) -> list[tuple[dict[str, Any], bytes]]:
        """The files shared in a thread (files.completeUploadExternal), each as files.info's
        object and its content, in order."""
        return [
            self.files[file["id"]]
            for message in self.in_thread(channel, thread_ts)
            for file in message.get("files", [])
        ]

    def _files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self.files.get(str(params.get("file")))
        if found is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": found[0]}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        authorization = request.headers.get("Authorization", "")
        self.downloads.append((file_id, authorization))
        fault = self._fault_for("files.download", {})
        if fault is not None and fault.redirect:
            return self._redirected(fault)
        if fault is not None and fault.hang_s:
            await asyncio.sleep(fault.hang_s)
        if fault is not None and not (fault.drip_s or fault.cut_at is not None):
            return web.Response(status=fault.status or 500, text="error")
        if not authorization.startswith("Bearer xoxb-") or file_id not in self.files:
            # Slack answers an unauthenticated download with its sign-in page, not a 401.
            return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")
        content = self.files[file_id][1]
        if fault is None:
            return web.Response(body=content, content_type="application/octet-stream")
        return await self._hostile_download(request, content, fault)

    async def _hostile_download(
        self, request: web.Request, content: bytes, fault: Fault
    ) -> web.StreamResponse:
        """The file dripped a byte at a time, or cut short of the length it claims."""
        response = web.StreamResponse()
        response.content_type = "application/octet-stream"
        if fault.cut_at is not None:
            response.content_length = len(content)
            response.force_close()
        await response.prepare(request)
        try:
            if fault.drip_s:
                for n in range(len(content)):
                    await response.write(content[n : n + 1])
                    await asyncio.sleep(fault.drip_s)
            else:
                await response.write(content[: fault.cut_at])
                request.transport.close()  # type: ignore[union-attr]
                return response
        except ConnectionError:
            return response  # the client stopped reading
        await response.write_eof()
        return response

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST":
            raw = await request.text()
            if request.content_type == "application/json" and raw:
                params.update(json.loads(raw))
            elif raw:
                params.update(dict(parse_qsl(raw, keep_blank_values=True)))
        for key in ("blocks", "view", "prompts"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        return params

    async def _authorize(self, request: web.Request) -> web.Response:
        """Slack's OAuth authorize page, the person approving at once (`tenancy` only)."""
        if self.tenancy is None:
            return web.Response(status=404, text="no OAuth here: set the emulator's tenancy")
        status, headers, body = self.tenancy.authorize(dict(request.query))
        return web.Response(status=status, headers=headers, text=body)

    async def _response_url(self, request: web.Request) -> web.Response:
        redirect = self._redirect_for("response_url")
        if redirect is not None:
            return self._redirected(redirect)
        self.responses.append(await request.json())
        return web.json_response({"ok": True})

    async def _moved(self, request: web.Request) -> web.Response:
        """Where a same-origin redirect points: records what arrived, answers as Slack would
        have (so a client that followed would believe it was done)."""
        self.moved.append(
            Arrival(
                request.method,
                request.path_qs,
                request.headers.get("Authorization", ""),
                await request.read(),
            )
        )
        return web.json_response({"ok": True})

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        call = Call(method, params, time.monotonic(), caller=request.match_info.get("caller", ""))
        self.calls.append(call)
        authorization = request.headers.get("Authorization", "")
        call.token = authorization.removeprefix("Bearer ")
        redirect = self._redirect_for(method)
        if redirect is not None:
            call.status = redirect.status
            return self._redirected(redirect)
        token_kind = "Bearer xapp-" if method == "apps.connections.open" else "Bearer xoxb-"
        scopes: dict[str, str] = {}
        # The tenancy answers the code exchange and renewal whole; Slack can fail them all the
        # same (a 5xx, a rate limit), so their faults come first.
        exchange = self.tenancy is not None and method == "oauth.v2.access"
        fault = self._fault_for(method, params, call) if exchange else None
        if fault is None and self.tenancy is not None:
            answer = self.tenancy.answer(method, params, authorization)
            scopes = self.tenancy.headers(authorization)
            if answer is not None:
                call.status = 200 if answer.get("ok") else 400
                call.answer = answer
                return web.json_response(answer, headers=scopes)
        elif fault is None and not authorization.startswith(token_kind):
            return web.json_response({"ok": False, "error": "not_authed"})
        if not exchange:
            fault = self._fault_for(method, params, call)
        if fault is not None and fault.applied:
            if exchange:
                assert self.tenancy is not None
                call.answer = self.tenancy.answer(method, params, authorization)
            else:
                call.answer = self._handle(method, params, authorization)
        if fault is not None:
            call.status = fault.status if fault.status != 200 else 400
            if fault.hang_s:
                await asyncio.sleep(fault.hang_s)
            headers = dict(scopes)
            if fault.retry_after is not None:
                headers["Retry-After"] = str(int(fault.retry_after))
            if fault.html:
                return web.Response(
                    text="<html><body>502 Bad Gateway</body></html>",
                    status=fault.status,
                    content_type="text/html",
                )
            error = fault.error or ("ratelimited" if fault.status == 429 else "internal_error")
            body: dict[str, Any] = {"ok": False, "error": error}
            if fault.needed is not None:
                body |= {"needed": fault.needed, "provided": "commands,chat:write"}
            return web.json_response(body, status=fault.status, headers=headers)
        await asyncio.sleep(self.delays.get(method, 0.0))
        body = self._handle(method, params, authorization)
        call.answer = body
        if not body.get("ok"):
            call.status = 400
        return web.json_response(body, headers=scopes)

    def _handle(
        self, method: str, params: dict[str, Any], authorization: str = ""
    ) -> dict[str, Any]:
        bot_user = self.tenancy.bot_user_of(authorization) if self.tenancy else None
        self._speaker = bot_user or BOT_USER
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None or (method in STREAM_METHODS and not self.streaming):
            return {"ok": False, "error": "unknown_method"}
        body: dict[str, Any] = handler(params)
        return body

    # --- limits ----------------------------------------------------------------------------

    @staticmethod
    def _blocks_error(blocks: list[dict[str, Any]] | None, limit: int = 50) -> str | None:
        if not blocks:
            return None
        if len(blocks) > limit:
            return "invalid_blocks"
        if block_chars(blocks) > MAX_BLOCK_TEXT:
            return "msg_blocks_too_long"
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

    def _reach(self, channel: str) -> str | None:
        if channel in self.archived:
            return "is_archived"
        if channel in self.outside:
            return "not_in_channel"
        return None

    def _chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel.startswith("U"):
            channel = f"D{channel}"
        unreachable = self._reach(channel)
        if unreachable:
            return {"ok": False, "error": unreachable}
        if params.get("thread_ts") and (channel, params["thread_ts"]) in self.deleted:
            return {"ok": False, "error": "thread_not_found"}
        if len(params.get("text") or "") > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        error = self._blocks_error(params.get("blocks"))
        if error:
            return {"ok": False, "error": error}
        metadata = self._metadata(params.get("metadata"))
        if metadata == "invalid":
            return {"ok": False, "error": "invalid_metadata_format"}
        message: dict[str, Any] = {
            "type": "message",
            "user": self._speaker,
            "bot_id": BOT_ID,
            "ts": self.next_ts(),
            "text": params.get("text", ""),
            "blocks": params.get("blocks") or [],
        }
        if params.get("thread_ts") and (channel, params["thread_ts"]) not in self.unthreaded:
            message["thread_ts"] = params["thread_ts"]
        echoed = dict(message)
        if metadata is not None:
            message["metadata"] = metadata
        self.messages.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": echoed}

    @staticmethod
    def _metadata(raw: Any) -> dict[str, Any] | str | None:
        """A post's `metadata` ("a JSON object with event_type and event_payload fields",
        JSON or form-encoded as a JSON string), "invalid" when it is not one."""
        if raw is None or raw == "":
            return None
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                return "invalid"
        # Bolt's assistant `say` sends `event_payload: null` with its thread context's
        # `event_type`, and Slack takes it: only a missing `event_type` is refused here.
        payload = raw.get("event_payload") if isinstance(raw, dict) else None
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("event_type"), str)
            or not isinstance(payload, dict | None)
        ):
            return "invalid"
        return {"event_type": raw["event_type"], "event_payload": payload}

    def _chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel", ""), params.get("ts")
        unreachable = self._reach(channel)
        if unreachable:
            return {"ok": False, "error": unreachable}
        kept = [m for m in self.messages.get(channel, []) if m["ts"] != ts]
        if len(kept) == len(self.messages.get(channel, [])):
            return {"ok": False, "error": "message_not_found"}
        gone = next(m for m in self.messages[channel] if m["ts"] == ts)
        if gone.get("user") != self._speaker:
            return {"ok": False, "error": "cant_delete_message"}
        self.messages[channel] = kept
        self.removed.append(gone)
        return {"ok": True, "channel": channel, "ts": ts}

    def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        unreachable = self._reach(params.get("channel", ""))
        if unreachable:
            return {"ok": False, "error": unreachable}
        error = self._blocks_error(params.get("blocks"))
        if error:
            return {"ok": False, "error": error}
        for message in self.messages.get(params.get("channel", ""), []):
            if message["ts"] == params.get("ts"):
                if self._streaming(message):
                    # As reported of the live API (no reference page names it).
                    return {"ok": False, "error": "streaming_state_conflict"}
                message["text"] = params.get("text", message["text"])
                message["blocks"] = params.get("blocks") or []
                message["edited"] = True
                return {"ok": True, "channel": params["channel"], "ts": message["ts"]}
        return {"ok": False, "error": "message_not_found"}

    # --- streams -------------------------------------------------------------------------

    def _streaming(self, message: dict[str, Any]) -> bool:
        if not message.get("streaming"):
            return False
        started = float(message.get("started_at", 0.0))
        if (
            self.stream_lifetime_s is not None
            and time.monotonic() - started > self.stream_lifetime_s
        ):
            message["streaming"] = False
        return bool(message["streaming"])

    @staticmethod
    def _arguments_error(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's refusal of arguments slack_sdk would not send for `method` (as
        `_assistant_call` checks its own), if any."""
        required, allowed = sdk_arguments(method)
        missing = sorted(required - set(params))
        # The client itself adds its token and, for a workspace it was built for, team_id.
        unknown = sorted(set(params) - allowed - {"token", "team_id"})
        if missing or unknown:
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": [f"missing {missing}, unknown {unknown}"]},
            }
        return None

    @staticmethod
    def _chunks_error(params: dict[str, Any]) -> str | None:
        """Slack's refusal of a request's `markdown_text` and `chunks`, if any."""
        if len(params.get("markdown_text") or "") > MAX_MARKDOWN_TEXT:
            return "msg_too_long"
        chunks = params.get("chunks")
        if chunks is None:
            return None
        if not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            return "invalid_chunks"
        for raw in chunks:
            parsed = Chunk.parse(raw)
            if parsed is None or parsed.to_dict() != raw:
                return "invalid_chunks"
            if raw["type"] == "task_update" and raw.get("status") not in TASK_STATUSES:
                return "invalid_chunks"
            if raw["type"] == "markdown_text" and len(raw.get("text") or "") > MAX_MARKDOWN_TEXT:
                return "msg_too_long"
        return None

    def _stream_of(self, params: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The streamed message `channel` and `ts` name, or why it cannot take more."""
        channel = str(params.get("channel") or "")
        unreachable = self._reach(channel)
        if unreachable:
            return None, unreachable
        message = next(
            (m for m in self.messages.get(channel, []) if m["ts"] == params.get("ts")), None
        )
        if message is None:
            return None, "message_not_found"
        if message.get("user") != self._speaker:
            return None, "message_not_owned_by_app"
        if not self._streaming(message):
            return None, "message_not_in_streaming_state"
        return message, None

    @staticmethod
    def _add_to_stream(message: dict[str, Any], params: dict[str, Any]) -> None:
        if params.get("markdown_text"):
            message["text"] += params["markdown_text"]
        for chunk in params.get("chunks") or []:
            message["chunks"].append(chunk)
            if chunk.get("type") == "markdown_text":
                message["text"] += chunk.get("text", "")

    def _chat_startStream(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self._arguments_error("chat.startStream", params)
        if refused:
            return refused
        channel = str(params["channel"])
        if channel.startswith("U"):
            channel = f"D{channel}"
        unreachable = self._reach(channel)
        if unreachable:
            return {"ok": False, "error": unreachable}
        if (channel, params["thread_ts"]) in self.deleted:
            return {"ok": False, "error": "thread_not_found"}
        if channel.startswith(("C", "G")):
            # "Required when streaming to channels."
            if not params.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
            if not params.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
        if params.get("task_display_mode", "timeline") not in ("timeline", "plan"):
            return {"ok": False, "error": "invalid_arguments"}
        error = self._chunks_error(params)
        if error:
            return {"ok": False, "error": error}
        message: dict[str, Any] = {
            "type": "message",
            "user": self._speaker,
            "bot_id": BOT_ID,
            "ts": self.next_ts(),
            "thread_ts": params["thread_ts"],
            "text": "",
            "blocks": [],
            "chunks": [],
            "streaming": True,
            "started_at": time.monotonic(),
            "task_display_mode": params.get("task_display_mode", "timeline"),
            "recipient_user_id": params.get("recipient_user_id"),
            "recipient_team_id": params.get("recipient_team_id"),
        }
        self._add_to_stream(message, params)
        self.messages.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"]}

    def _chat_appendStream(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self._arguments_error("chat.appendStream", params)
        if refused:
            return refused
        message, error = self._stream_of(params)
        if message is None:
            return {"ok": False, "error": error}
        if not params.get("markdown_text") and not params.get("chunks"):
            return {"ok": False, "error": "no_text"}
        error = self._chunks_error(params)
        if error:
            return {"ok": False, "error": error}
        self._add_to_stream(message, params)
        return {"ok": True, "channel": params["channel"], "ts": message["ts"]}

    def _chat_stopStream(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self._arguments_error("chat.stopStream", params)
        if refused:
            return refused
        message, error = self._stream_of(params)
        if message is None:
            return {"ok": False, "error": error}
        error = self._chunks_error(params) or self._blocks_error(params.get("blocks"))
        if error:
            return {"ok": False, "error": error}
        self._add_to_stream(message, params)
        message["blocks"] = params.get("blocks") or []
        message["streaming"] = False
        return {"ok": True, "channel": params["channel"], "ts": message["ts"], "message": message}

    def _chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        unreachable = self._reach(params.get("channel", ""))
        if unreachable:
            return {"ok": False, "error": unreachable}
        self.ephemeral.append(params)
        return {"ok": True, "message_ts": self.next_ts()}

    def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = str(params.get("users") or "")
        if not users.startswith("U") or "," in users:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "channel": {"id": f"D{users}"}}

    def _chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel", ""), str(params.get("message_ts", ""))
        link = f"https://emulated.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel", "")
        if not channel.startswith(("C", "G", "D")):
            return {"ok": False, "error": "channel_not_found"}
        info = {
            "id": channel,
            "is_channel": channel.startswith("C"),
            "is_im": channel.startswith("D"),
            "is_archived": channel in self.archived,
            "is_member": channel not in self.outside,
        }
        return {"ok": True, "channel": info}

    def _users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        members = [
            {"id": user, "is_admin": True, "is_owner": False, "deleted": False, "is_bot": False}
            for user in sorted(self.admins)
        ]
        members += list(self.users.values())
        members.append({"id": BOT_USER, "is_bot": True, "is_admin": False, "deleted": False})
        limit = int(params.get("limit") or 200)
        start = int(params.get("cursor") or 0)
        more = start + limit < len(members)
        return {
            "ok": True,
            "members": members[start : start + limit],
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.app_token_error:
            return {"ok": False, "error": self.app_token_error}
        return {"ok": True, "url": self.url.replace("http://", "ws://") + "/socket"}

    # --- Socket Mode ---------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self.socket_connections += 1
        self.sockets.append(socket)
        self.transports[id(socket)] = request.transport
        await socket.send_json(
            {
                "type": "hello",
                "num_connections": len(self.sockets),
                "connection_info": {"app_id": "A1"},
                "debug_info": {"host": "emulated", "approximate_connection_time": 3600},
            }
        )
        async for frame in socket:
            if frame.type == web.WSMsgType.TEXT:
                self.socket_acks.append(json.loads(frame.data))
        if socket in self.sockets:
            self.sockets.remove(socket)
        return socket

    async def push_raw(self, frame: str) -> None:
        """Send `frame` as it is down the newest socket (a frame Slack would never send)."""
        await self.sockets[-1].send_str(frame)

    async def push(self, kind: str, payload: dict[str, Any], **extra: Any) -> str:
        """Send an envelope (`slash_commands`, `events_api`, `interactive`) down the newest
        socket; returns its envelope id, which the bot's ack names."""
        envelope_id = f"env-{self.next_ts()}"
        await self.sockets[-1].send_json(
            {"envelope_id": envelope_id, "type": kind, "payload": payload, **extra}
        )
        return envelope_id

    async def ask_to_reconnect(self) -> None:
        """Slack's periodic `disconnect` (refresh_requested): the client must reconnect."""
        await self.sockets[-1].send_json(
            {"type": "disconnect", "reason": "refresh_requested", "debug_info": {}}
        )

    async def drop_socket(self) -> None:
        """Cut the newest socket's connection with no closing handshake, as a network failure
        would."""
        socket = self.sockets.pop()
        transport = self.transports.pop(id(socket))
        transport.abort()

    def _conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread, its root first: `thread_not_found` when `ts` names no message."""
        channel = params.get("channel", "")
        if channel in self.outside:
            return {"ok": False, "error": "not_in_channel"}
        channel_messages = self.messages.get(channel, [])
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
        return self._page(thread, params, default_limit=1000)

    def _conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        """A channel's top-level messages, newest first (replies stay in their threads). A bot
        token reads only the conversations its bot is a member of: `not_in_channel` else."""
        channel = params.get("channel", "")
        if channel in self.outside:
            return {"ok": False, "error": "not_in_channel"}
        if not channel or channel.startswith("U"):
            return {"ok": False, "error": "channel_not_found"}
        top = [
            m
            for m in self.messages.get(channel, [])
            if not m.get("thread_ts") or m["thread_ts"] == m["ts"]
        ]
        return self._page(list(reversed(top)), params, default_limit=100)

    def _page(
        self, messages: list[dict[str, Any]], params: dict[str, Any], *, default_limit: int
    ) -> dict[str, Any]:
        """One page of `messages` as `conversations.history` and `.replies` give them: within
        `oldest`..`latest` (`inclusive` keeps the bounds), `limit` at a time (at most
        `history_page_cap`), by cursor (`invalid_cursor` for one this did not hand out), and
        with each message's metadata only when `include_all_metadata` asks for it."""
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        oldest = float(params.get("oldest") or 0)
        latest = float(params.get("latest") or "inf")

        def within(ts: float) -> bool:
            if inclusive:
                return oldest <= ts <= latest
            return oldest < ts < latest

        kept = [m for m in messages if within(float(m["ts"]))]
        limit = int(params.get("limit") or default_limit)
        if self.history_page_cap is not None:
            limit = min(limit, self.history_page_cap)
        cursor = str(params.get("cursor") or "0")
        if not cursor.isdigit():
            return {"ok": False, "error": "invalid_cursor"}
        start = int(cursor)
        page = kept[start : start + limit]
        more = start + limit < len(kept)
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        return {
            "ok": True,
            "messages": [
                m if with_metadata else {k: v for k, v in m.items() if k != "metadata"}
                for m in page
            ],
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

    def _assistant_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        required, allowed = sdk_arguments(method)
        missing = sorted(required - set(params))
        # The client itself adds its token and, for a workspace it was built for, team_id.
        unknown = sorted(set(params) - allowed - {"token", "team_id"})
        if missing or unknown:
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": [f"missing {missing}, unknown {unknown}"]},
            }
        if method.endswith("setSuggestedPrompts"):
            prompts = params.get("prompts")
            if not isinstance(prompts, list) or not 1 <= len(prompts) <= 4:
                return {"ok": False, "error": "invalid_arguments"}
            if any(not {"title", "message"} <= set(p) for p in prompts):
                return {"ok": False, "error": "invalid_arguments"}
        self.assistant.append((method, params))
        return {"ok": True}

    def _assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._assistant_call("assistant.threads.setStatus", params)

    def _assistant_threads_setTitle(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._assistant_call("assistant.threads.setTitle", params)

    def _assistant_threads_setSuggestedPrompts(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._assistant_call("assistant.threads.setSuggestedPrompts", params)

    def _agents_sessions_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self._arguments_error("agents.sessions.setStatus", params)
        return refused or self.agent_sessions.set_status(params)

    def _agents_sessions_rename(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self._arguments_error("agents.sessions.rename", params)
        return refused or self.agent_sessions.rename(params)

    def press_stop(self, channel: str, thread_ts: str, user: str) -> dict[str, Any]:
        """`user` presses Stop on the thread's agent session: Slack stops the bot's streams
        there and sends the returned event (deliver it over either transport)."""
        stopped = [
            m["ts"]
            for m in self.streams(channel)
            if m.get("thread_ts") == thread_ts and self._streaming(m)
        ]
        event = self.agent_sessions.stop_event(channel, thread_ts, user, stopped)
        for ts in stopped:
            self.close_stream(channel, ts)
        return event

    def session_statuses(self) -> list[str]:
        """Every status the bot sent `agents.sessions.setStatus`, answered or refused."""
        return [
            str(c.params.get("status"))
            for c in self.calls_of("agents.sessions.setStatus", ok_only=False)
        ]

    def assistant_calls(self, method: str) -> list[dict[str, Any]]:
        return [params for called, params in self.assistant if called == method]

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


def sdk_arguments(method: str) -> tuple[set[str], set[str]]:
    """The arguments `slack_sdk` sends for `method`: (required, allowed)."""
    signature = inspect.signature(getattr(AsyncWebClient, method.replace(".", "_")))
    keywords = {
        name: parameter
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    required = {n for n, p in keywords.items() if p.default is inspect.Parameter.empty}
    return required, set(keywords)
