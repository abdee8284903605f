"""How the bot writes messages to Slack: paced per channel, in order, every failure classified.
Every owed message goes this way; what Bolt answers on its own (`ack`, `respond`, `say`, the
forms, the assistant's title and prompts) does not.

Slack allows about one message per second per channel. Every write to a channel (a stream's
start, appends and stop among them) waits its turn (`bot.slackweb.channel_turns`), so messages
land in the order they were asked for, except that a turn's first words in the live plan go
before the writes waiting; a 429 holds the whole channel for `Retry-After` seconds. Every
failure becomes a `PostError` with Slack's error code (or `http_503`, `timeout`, `unreachable`,
`bad_response`, `redirected`) and whether trying again may help, so the outbox can retry outages
for hours and give up at once on a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.messages.kit import Message
from bot.messages.sessions import SessionStatus
from bot.outbound import Failure, OutboundError
from bot.slackweb.channel_turns import ChannelTurns
from bot.slackweb.errors import TOKEN_REFUSED, PostError, TokenRefusedError, UnthreadedError

log = logging.getLogger(__name__)

TRANSIENT_CODES = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
        "team_added_to_org",
    }
)


def _status(error: SlackApiError) -> int | None:
    response = error.response
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    return status if isinstance(status, int) else None


def _code(error: SlackApiError) -> str | None:
    """Slack's error code, when the answer was Slack's JSON (a proxy's HTML page has none)."""
    data = getattr(error.response, "data", None)
    if isinstance(data, dict):
        code = data.get("error")
        return str(code) if code else None
    return None


def _header(error: SlackApiError, name: str) -> str | None:
    headers = getattr(error.response, "headers", None) or {}
    for key, value in dict(headers).items():
        if str(key).lower() == name:
            return str(value[0] if isinstance(value, list) and value else value)
    return None


def _retry_after(error: SlackApiError, default: float) -> float:
    raw = _header(error, "retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except ValueError:
        return default


def classify(error: Exception, method: str, channel: str) -> PostError:
    """The `PostError` for whatever a Slack call raised: code, cause, and whether to retry."""
    if isinstance(error, SlackApiError):
        status, code = _status(error), _code(error)
        # Slack, *Rate limits*: HTTP 429 with Retry-After, the seconds to wait.
        if status == 429 or code in ("ratelimited", "rate_limited"):
            return PostError(
                f"Slack rate limited {method} in {channel}",
                code="ratelimited",
                retryable=True,
                retry_after_s=_retry_after(error, 1.0),
            )
        if status is not None and status >= 500:
            code = code or f"http_{status}"
            return PostError(
                f"Slack answered {method} in {channel} with HTTP {status} ({code})",
                code=code,
                retryable=True,
                retry_after_s=_retry_after(error, 0.0) or None,
            )
        if code is None:
            return PostError(
                f"Slack's answer to {method} in {channel} was not Slack's JSON (HTTP {status})",
                code="bad_response",
                retryable=True,
            )
        # Slack's Web API answers a refusal with HTTP 200, `"ok": false` and its error code.
        return PostError(
            f"Slack refused {method} in {channel}: {code}",
            code=code,
            retryable=code in TRANSIENT_CODES,
        )
    if isinstance(error, OutboundError) and error.failure is Failure.REDIRECT:
        # Slack documents no redirect for any method: something on the way rewrote the answer,
        # and the session did not follow it (bot.outbound.refuse_redirects). What rewrites may
        # stop, so the message waits its turn like one in an outage.
        return PostError(
            f"Slack's answer to {method} in {channel} was a redirect to {error.target}, which"
            " the bot does not follow (its token goes only to Slack's API address): something"
            " between the bot and Slack is rewriting answers; check DEBATEBOT_SLACK_API_URL and"
            " any proxy on the way",
            code="redirected",
            retryable=True,
        )
    if isinstance(error, TimeoutError):
        return PostError(
            f"Slack did not answer {method} in {channel} in time", code="timeout", retryable=True
        )
    reason = str(error) or type(error).__name__
    return PostError(
        f"could not reach Slack for {method} in {channel}: {reason}",
        code="unreachable",
        retryable=True,
    )


def _posted(response: Any, method: str, channel: str) -> Posted:
    """Where Slack's answer to `method` says it put the message (a DM's channel is the one it
    answers with). No ts is a PostError: reposting could duplicate a message Slack may have
    taken, so it is given up, loudly."""
    ts = response.get("ts")
    if not ts:
        raise PostError(
            f"Slack accepted {method} in {channel} but returned no ts", code="bad_response"
        )
    return Posted(channel=str(response.get("channel") or channel), ts=str(ts))


UPLOAD_METHODS = frozenset({"files.getUploadURLExternal", "files.completeUploadExternal"})
"""The methods of a file upload (`files:write`: "allows your app to upload files"). Only a
debate's receipt is uploaded, so a workspace that did not grant the scope lacks that one
feature: its `missing_scope` there is the upload's own refusal (bot.jobs.delivery.files sends
the receipt's command instead), not a refusal of the token that holds every delivery."""


def token_refusal(raised: Exception, method: str) -> TokenRefusedError | None:
    """The refusal of the bot token itself in what a call raised (`TOKEN_REFUSED`), or None."""
    if not isinstance(raised, SlackApiError):
        return None
    code = _code(raised)
    if code not in TOKEN_REFUSED:
        return None
    # `method` is Slack's name (`files.getUploadURLExternal`) or slack_sdk's (`files_get...`).
    if code == "missing_scope" and method.replace("_", ".", 1) in UPLOAD_METHODS:
        return None
    data = getattr(raised.response, "data", None)
    needed = data.get("needed") if isinstance(data, dict) else None
    return TokenRefusedError(
        f"Slack refused the bot token on {method}: {code}",
        code=code,
        needed=str(needed) if needed else None,
    )


SLACK_FAILURES = (
    SlackApiError,
    SlackClientError,
    aiohttp.ClientError,
    OutboundError,
    TimeoutError,
    ValueError,
)
"""What a slack_sdk call raises when Slack or the network fails (OutboundError: a redirect the
session refused; ValueError: a body that is not JSON)."""


class MeteredWebClient(AsyncWebClient):
    """Slack's Web API client, telling `on_error(method, raised)` of every call that fails: the
    one place every Slack call (the bot's, and Bolt's own) passes through. It calls only on the
    open pooled session it was given (`bot.wiring.slack_session`, which follows no redirect):
    without one, slack_sdk would open a plain aiohttp session of its own, which does."""

    def __init__(self, *, on_error: Callable[[str, Exception], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_error = on_error

    async def _request(
        self, *, http_verb: str, api_url: str, req_args: dict[str, Any]
    ) -> dict[str, Any]:
        # slack_sdk's `_request_with_session` opens a session of its own when the one it holds
        # is missing or closed (the process stopping): refused here instead.
        if self.session is None or self.session.closed:
            raise SlackRequestError(
                f"no call to {api_url}: the pooled Slack session is closed (the process is"
                " stopping) or was never given, and a session slack_sdk opened itself would"
                " follow redirects with the token"
            )
        return await super()._request(http_verb=http_verb, api_url=api_url, req_args=req_args)

    def for_request(self, made: AsyncWebClient) -> MeteredWebClient:
        """`made`, the plain client Bolt builds for each request from this one (its session,
        address and deadline, the request's token and an org-wide install's `team_id`), as a
        client of this kind telling this `on_error`."""
        client = MeteredWebClient(
            on_error=self.on_error,
            token=made.token,
            base_url=made.base_url,
            timeout=made.timeout,
            ssl=made.ssl,
            proxy=made.proxy,
            session=made.session,
            trust_env_in_session=made.trust_env_in_session,
            headers=made.headers,
            logger=made.logger,
            retry_handlers=list(made.retry_handlers),
        )
        client.default_params = dict(made.default_params)
        return client

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            return await super().api_call(api_method, **kwargs)
        except SLACK_FAILURES as raised:
            self.on_error(api_method, raised)
            raise


@dataclass(frozen=True)
class Posted:
    """Where Slack put a message: the channel it answered with (a DM's `D…` id) and the ts."""

    channel: str
    ts: str


_HELD: ContextVar[frozenset[str]] = ContextVar("held_channels", default=frozenset())
"""The channels whose turn the current task holds (`SlackPoster.turn`)."""


class SlackPoster:
    """Paced, ordered, classified chat writes for one bot token."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        interval_s: float = 1.0,
        max_attempts: int = 3,
        max_retry_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.interval_s = interval_s
        self.max_attempts = max_attempts
        self.max_retry_after_s = max_retry_after_s
        self._clock = clock
        self._sleep = sleep
        self._turns: defaultdict[str, ChannelTurns] = defaultdict(ChannelTurns)
        self._next_at: dict[str, float] = {}

    @contextlib.asynccontextmanager
    async def turn(self, channel: str, *, urgent: bool = False) -> AsyncIterator[None]:
        """Hold `channel`'s next write: its writers' turn (`ChannelTurns`: urgent ones first)
        and the channel's pace waited out. Every write to `channel` within it (by this task)
        goes in this turn, each still `interval_s` after the last; a writer that must read
        what it writes as late as it can (the live plan's newest version) reads it here."""
        if channel in _HELD.get():
            yield
            return
        turns = self._turns[channel]
        place = await turns.enter(urgent=urgent)
        held = _HELD.set(_HELD.get() | {channel})
        try:
            await self._paced(channel)
            while not urgent and turns.urgent_waiting():
                await turns.step_aside(place)
                await self._paced(channel)
            yield
        finally:
            _HELD.reset(held)
            turns.leave()

    async def _paced(self, channel: str) -> None:
        """Wait until `channel` may be written to again."""
        wait = self._next_at.get(channel, 0.0) - self._clock()
        if wait > 0:
            await self._sleep(wait)

    async def _call(
        self,
        method: str,
        channel: str,
        attempts: int | None = None,
        *,
        channel_param: str | None = "channel",
        **kwargs: Any,
    ) -> AsyncSlackResponse:
        """Call `method` in `channel` (passed as `channel_param`; None: not passed, the call is
        only paced with the channel's writes); a 429 is waited out and retried while
        `attempts` last, every other failure raises its classified `PostError`."""
        api = getattr(self.client, method)
        tries = attempts or self.max_attempts
        where = {channel_param: channel} if channel_param is not None else {}
        async with self.turn(channel):
            for attempt in range(1, tries + 1):
                await self._paced(channel)
                try:
                    response: AsyncSlackResponse = await api(**where, **kwargs)
                except SLACK_FAILURES as raised:
                    refused = token_refusal(raised, method)
                    if refused is not None:
                        raise refused from raised
                    error = classify(raised, method, channel)
                    if error.code == "ratelimited":
                        # Slack's Retry-After holds the channel as given; only a short one is
                        # waited out here, a longer one is the outbox's to schedule.
                        delay = error.retry_after_s or 1.0
                        self._next_at[channel] = self._clock() + delay
                        log.warning(
                            "slack %s in %s rate limited (attempt %d/%d); next try in %.1fs",
                            method,
                            channel,
                            attempt,
                            tries,
                            delay,
                        )
                        if attempt < tries and delay <= self.max_retry_after_s:
                            continue
                    log.warning(
                        "slack %s in %s failed: %s (%s)", method, channel, error.code, error
                    )
                    raise error from raised
                self._next_at[channel] = self._clock() + self.interval_s
                return response
        raise AssertionError("unreachable: the loop returns or raises")

    async def post(
        self,
        *,
        channel: str,
        message: Message,
        thread_ts: str | None = None,
        attempts: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Posted:
        """Post a message (in a thread when `thread_ts` is given); `channel` may be a user id,
        which Slack delivers as a DM from the app. `metadata` ("a JSON object with event_type
        and event_payload fields") is stored with the message, unseen by people, and returned
        by `conversations.history` and `.replies` asked with `include_all_metadata`."""
        response = await self._call(
            "chat_postMessage",
            channel,
            attempts,
            text=message.text,
            blocks=message.blocks,
            thread_ts=thread_ts,
            unfurl_links=False,
            unfurl_media=False,
            metadata=metadata,
        )
        posted = _posted(response, "chat_postMessage", channel)
        echoed = response.get("message")
        # Slack echoes the message it stored; a reply it stored without our thread_ts went to
        # the channel's top level (reported when a thread's root was just deleted). A stand-in
        # that echoes nothing cannot be checked.
        if (
            thread_ts is not None
            and isinstance(echoed, dict)
            and echoed
            and echoed.get("thread_ts") != thread_ts
        ):
            raise UnthreadedError(
                f"Slack posted a reply meant for thread {thread_ts} in {channel} outside it",
                stray=posted,
            )
        return posted

    async def delete(self, *, channel: str, ts: str) -> None:
        """Delete one of the bot's own messages (a reply Slack posted outside its thread)."""
        await self._call("chat_delete", channel, 1, ts=ts)

    async def update(
        self, *, channel: str, ts: str, message: Message, attempts: int | None = None
    ) -> None:
        await self._call(
            "chat_update", channel, attempts, ts=ts, text=message.text, blocks=message.blocks
        )

    async def assistant_status(
        self,
        *,
        channel: str,
        thread_ts: str,
        status: str,
        attempts: int | None = None,
        loading_messages: list[str] | None = None,
    ) -> None:
        """The assistant thread's status line ("critic is challenging…"); empty clears it.
        `loading_messages` rotate under it while a model generates (Slack takes at most 10)."""
        await self._call(
            "assistant_threads_setStatus",
            channel,
            attempts,
            channel_param="channel_id",
            thread_ts=thread_ts,
            status=status,
            loading_messages=loading_messages or None,
        )

    async def session_status(
        self,
        *,
        channel: str,
        thread_ts: str,
        status: SessionStatus,
        title: str,
        attempts: int | None = None,
    ) -> str | None:
        """Set the agent session of a thread to `status` ("creating the session if needed", with
        `title`, which Slack uses only then), and return Slack's `warning`, if it gave one
        (`missing_agent_session_stopped_event_subscription`: the app does not receive the Stop
        button's event). slack_sdk (3.44+; 3.48 here) has `agents_sessions_setStatus`, so no
        generic `api_call` is needed. A refusal raises its `PostError` like any call:
        `not_authorized` for an app not declared an agent, `unknown_method` where Slack has no
        agent sessions, `invalid_arguments` for a status it does not accept."""
        response = await self._call(
            "agents_sessions_setStatus",
            channel,
            attempts,
            channel_param="channel_id",
            thread_ts=thread_ts,
            status=status.value,
            title=title or None,
        )
        warning = response.get("warning")
        return str(warning) if warning else None

    async def start_stream(
        self,
        *,
        channel: str,
        thread_ts: str,
        chunks: list[dict[str, Any]],
        recipient_user_id: str,
        recipient_team_id: str,
        attempts: int | None = None,
    ) -> Posted:
        """Start a streamed reply in the thread, shown as a plan (`task_display_mode: plan`:
        "plan task updates render together in a plan block"). The recipient goes with every
        stream, as Bolt's `say_stream` sends it: `recipient_user_id` and `recipient_team_id` are
        "required when streaming to channels". The stream is opened with chunks, so it takes
        chunks to its end."""
        response = await self._call(
            "chat_startStream",
            channel,
            attempts,
            thread_ts=thread_ts,
            chunks=chunks,
            task_display_mode="plan",
            recipient_user_id=recipient_user_id,
            recipient_team_id=recipient_team_id,
        )
        return _posted(response, "chat_startStream", channel)

    async def append_stream(
        self, *, channel: str, ts: str, chunks: list[dict[str, Any]], attempts: int | None = None
    ) -> None:
        """Add `chunks` to a stream (a `task_update` with a known id replaces that task)."""
        await self._call("chat_appendStream", channel, attempts, ts=ts, chunks=chunks)

    async def stop_stream(
        self,
        *,
        channel: str,
        ts: str,
        chunks: list[dict[str, Any]] | None = None,
        blocks: list[dict[str, Any]] | None = None,
        attempts: int | None = None,
    ) -> None:
        """End a stream with its last chunks and `blocks`, "rendered at the bottom of the
        finalized message" (the verdict's summary and the feedback buttons); with neither, it
        only ends the stream as it stands."""
        await self._call(
            "chat_stopStream",
            channel,
            attempts,
            ts=ts,
            chunks=chunks or None,
            blocks=blocks or None,
        )

    async def upload_address(
        self, *, channel: str, filename: str, length: int, attempts: int | None = None
    ) -> tuple[str, str]:
        """Step one of an upload (`files.getUploadURLExternal`, `filename` and `length` "size
        in bytes" both required), for a file to share in `channel`: Slack's file id and the
        address to post its bytes to. An answer without both is a PostError (`bad_response`)."""
        response = await self._call(
            "files_getUploadURLExternal",
            channel,
            attempts,
            channel_param=None,
            filename=filename,
            length=length,
        )
        file_id, url = response.get("file_id"), response.get("upload_url")
        if not file_id or not url:
            raise PostError(
                f"Slack's answer to files.getUploadURLExternal for {channel} held no file id or"
                " upload address",
                code="bad_response",
                retryable=True,
            )
        return str(file_id), str(url)

    async def complete_upload(
        self,
        *,
        channel: str,
        thread_ts: str,
        file_id: str,
        title: str,
        comment: str,
        attempts: int | None = None,
    ) -> None:
        """Step three (`files.completeUploadExternal`): share the uploaded file in `channel`'s
        thread `thread_ts` (its parent's ts: "never use a reply's ts"), introduced by `comment`
        (`initial_comment`, "the message text introducing the file")."""
        await self._call(
            "files_completeUploadExternal",
            channel,
            attempts,
            channel_param="channel_id",
            files=[{"id": file_id, "title": title}],
            thread_ts=thread_ts,
            initial_comment=comment,
        )

    async def ephemeral(
        self, *, channel: str, user: str, text: str, thread_ts: str | None = None
    ) -> None:
        """A message only `user` sees; refusals and confirmations go this way."""
        await self._call("chat_postEphemeral", channel, user=user, text=text, thread_ts=thread_ts)
