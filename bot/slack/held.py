"""Events kept for later: a review reaction, an ADR post or a message to the agent that Slack
delivered while it refused the workspace's bot token, or while it failed for a moment to give
what the event needs (the thread a reaction asks to debate).

Slack was answered 200 for the event (it is acknowledged first: bot.slack.after_ack), so it
never sends it again, and telling the person would need the token Slack refuses. So the event's
body is kept in the store, in its workspace, once per Slack event id (bot.store.held), and
nothing is said yet; with OAuth installs the refusal is also marked for every replica
(bot.store.refusals), which sets the token probes going. Every `serve` process looks for kept
events it may replay (`run_forever`): due, and of a workspace whose token Slack takes again
(the probe that finds it taken clears the mark, on whichever replica; with one workspace, this
process's own view of the token, `TokenGate`, which its delivery loop probes). Each is claimed
by one replica and handed to the app as Slack would hand it (`AsyncBoltRequest` in socket mode:
the body was checked when it arrived), and the listener's work is waited for; a listener that
meets the refusal again keeps it again, else the row is forgotten.

Bounds (`HeldLimits`): a workspace keeps at most `max_held` events; one past that is not kept,
and its sender is owed a DM saying so (the outbox holds it until the token works, then sends
it); an event older than `max_age_s`, or replayed `max_attempts` times, is given up the same
way: its sender is told, in a DM, what was not done and to ask again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.messages import kit, posts
from bot.slack.after_ack import collecting
from bot.slack.errors import RefusedTokenError, SlackUnavailableError
from bot.slack.triggers import ONE_METHOD
from bot.slackweb.errors import TOKEN_REFUSED, PostError, TokenRefusedError
from bot.slackweb.poster import token_refusal
from bot.slackweb.token import TokenGate, workspace_token_fix
from bot.store import dedupe, held, outbox, refusals
from bot.store.db import in_session
from bot.store.errors import StoreError
from bot.store.held import Held, HeldLimits
from bot.store.held_tables import HeldReason, HeldTrigger
from bot.store.outbox import Draft
from bot.store.tenancy import EVERY_WORKSPACE, Workspace, owner_of
from engine.models import utcnow

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

    from bot.slack.surface import Surface

log = logging.getLogger(__name__)
R = TypeVar("R")

REPLAY = "held_replay"
"""The request context key of a replayed event: how many times it has been replayed."""
HOLDABLE = frozenset({"message", "reaction_added"})
"""The events that ask for something (an ADR post, a message to the agent, a review reaction):
an App Home opened meanwhile, or a context that changed, is worth nothing later."""
MAX_BODY_CHARS = 512 * 1024
"""An event larger than this is not kept, as one past the bound (its sender is told): Slack's
own events are far smaller (a message's text is at most 40,000 characters)."""
RETRY_S = 30.0
"""A thread Slack failed to give is read again after this long, then twice as long each time."""


@dataclass
class HeldEvents:
    """Keeps events for later and replays them through `app` (set once the app is built)."""

    engine: Engine
    owner: str
    gate: TokenGate | None
    """With one workspace: the process's view of the bot token (replays wait while it is
    refused). None with OAuth installs, where the store's mark says."""
    backoff: refusals.Backoff
    limits: HeldLimits = field(default_factory=HeldLimits)
    poll_s: float = 1.0
    claim_s: float = 120.0
    retry_s: float = RETRY_S
    wake_delivery: Callable[[], None] = lambda: None
    app: AsyncApp | None = None

    async def _db(self, work: Callable[[Session], R], workspace: Workspace | None = None) -> R:
        return await in_session(self.engine, work, workspace=workspace or EVERY_WORKSPACE)

    # --- keeping -------------------------------------------------------------------------

    async def keep(
        self, error: Exception, body: dict[str, Any], surface: Surface, context: AsyncBoltContext
    ) -> bool:
        """Keep the event `body` that met `error`, if it is one to keep: True when kept (or
        told it could not be), False when `error` is none of this module's business."""
        event = body.get("event") or {}
        if body.get("type") != "event_callback" or event.get("type") not in HOLDABLE:
            return False
        refused = _refusal(error)
        if refused is None and not isinstance(error, SlackUnavailableError):
            return False
        try:
            if isinstance(error, SlackUnavailableError):
                await self._keep_failed(error, body, surface, replays(context))
            elif refused is not None:
                await self._keep_refused(body, surface, *refused)
        except StoreError as failure:
            # Neither kept nor told (telling needs the token, or a store to owe it in).
            log.error("%s was lost: it could not be kept (%s)", describe(body), failure)
        return True

    async def _keep_refused(
        self, body: dict[str, Any], surface: Surface, code: str, scope: str | None
    ) -> None:
        """Slack refuses the workspace's token: kept until it works, or, past the bound, its
        sender owed a DM sent once it works."""
        await self._note_refused(surface.workspace, code, scope)
        kept = await self._hold(body, surface.workspace, HeldReason.TOKEN_REFUSED, utcnow())
        where = surface.workspace.team_id
        if kept is Held.NEW:
            log.warning(
                "Slack refuses the bot token of workspace %s (%s): %s kept, to be handled once"
                " the token works",
                where,
                code,
                describe(body),
            )
        elif kept is Held.FULL:
            log.warning(
                "Slack refuses the bot token of workspace %s (%s) and %d events wait already:"
                " %s not kept; its sender is told once the token works",
                where,
                code,
                self.limits.max_held,
                describe(body),
            )
            await self._owe_notice(surface.workspace, body, full=True)

    async def _keep_failed(
        self, error: SlackUnavailableError, body: dict[str, Any], surface: Surface, replayed: int
    ) -> None:
        """Slack failed for a moment: kept to be replayed later (its sender told so the first
        time), or, replayed `max_attempts` times already, given up and told why."""
        event = body.get("event") or {}
        if replayed < self.limits.max_attempts:
            wait = self.retry_s * 2**replayed
            due = utcnow() + timedelta(seconds=wait)
            kept = await self._hold(body, surface.workspace, HeldReason.SLACK_FAILED, due)
            if kept is not Held.FULL:
                log.warning("%s: %s kept, replayed in %g s", error, describe(body), wait)
                if replayed == 0:
                    await _tell(
                        surface,
                        event,
                        f":hourglass: {error}, so I could not start the debate yet. I will try"
                        f" again in {_duration(wait)}; nothing for you to do.",
                    )
                return
        log.warning("%s: %s given up after %d replays", error, describe(body), replayed)
        await _tell(
            surface,
            event,
            f":warning: {error}, and it kept failing when I tried again, so no debate was"
            f" started. {ask_again(event)}",
        )

    async def _hold(
        self, body: dict[str, Any], workspace: Workspace, reason: HeldReason, due: datetime
    ) -> Held:
        text = json.dumps(body)
        if len(text) > MAX_BODY_CHARS:
            return Held.FULL
        event = body.get("event") or {}
        when = body.get("event_time")
        at = (
            datetime.fromtimestamp(float(when), tz=utcnow().tzinfo)
            if isinstance(when, int | float)
            else utcnow()
        )
        return await self._db(
            lambda s: held.hold(
                s,
                key=dedupe.event_key(str(body.get("event_id"))),
                body=text,
                reason=reason,
                event_at=at,
                due_at=due,
                user_id=_sender(event),
                channel_id=_channel(event),
                limits=self.limits,
            ),
            workspace,
        )

    async def _note_refused(self, workspace: Workspace, code: str, scope: str | None) -> None:
        """With OAuth installs, mark the refusal for every replica (its probes start), as a
        delivery that meets it does; with one workspace the client told the gate already."""
        if self.gate is not None:
            return
        noted = await self._db(
            lambda s: refusals.refuse(
                s, workspace=workspace, code=code, scope=scope, backoff=self.backoff
            )
        )
        if noted is refusals.Noted.NEW:
            log.error(
                "Slack refused the bot token of workspace %s (%s): its events are kept and none"
                " of its debates is claimed until the token works; to fix it, %s",
                workspace.team_id,
                code,
                workspace_token_fix(code, scope),
            )

    async def _owe_notice(self, workspace: Workspace, body: dict[str, Any], *, full: bool) -> None:
        """Owe the event's sender a DM saying it was not acted on: held by the outbox while the
        token is refused, sent once it works. Once a day per person for events not kept."""
        event = body.get("event") or {}
        user = _sender(event)
        if user is None:
            return
        if full:
            key = f"held-lost:{user}:{utcnow().date().isoformat()}"
            why = (
                "Slack was refusing my bot token in this workspace and I was already keeping"
                f" as many requests as I hold for it ({self.limits.max_held}), so I did not keep"
            )
        else:
            key = f"held-lost:{event_key_of(body)}"
            why = "I could not act on"
        text = f":warning: {why} {what_was_asked(event)}. {ask_again(event)}"
        message = posts.notice(text)
        draft = Draft(key=key, text=message.text, blocks=message.blocks)
        await self._db(lambda s: outbox.owe_channel(s, channel_id=user, draft=draft), workspace)
        self.wake_delivery()

    # --- replaying -----------------------------------------------------------------------

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Replay what may be replayed, every `poll_s`, until `stop` is set; a store outage
        only waits for the next look."""
        while not stop.is_set():
            try:
                await self.drain()
            except StoreError as error:
                log.warning("kept Slack events not looked at: %s", error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll_s)

    async def drain(self, limit: int = 20) -> int:
        """Replay (or give up) the kept events this process may take now; how many."""
        if self.app is None or (self.gate is not None and self.gate.refused):
            return 0
        rows = await self._db(
            lambda s: held.claim(s, owner=self.owner, claim_s=self.claim_s, limit=limit)
        )
        for row in rows:
            try:
                if self._expired(row):
                    await self._give_up(row)
                else:
                    await self._replay(row)
            except Exception:
                # A bug, not Slack (the listeners answer Slack's failures): the row stays
                # claimed, and is tried again once its claim lapses, a bounded number of times.
                log.exception("a kept Slack event (%s) failed to replay", row.key)
                continue
            await self._db(partial(held.finish, row_id=row.id or 0, owner=self.owner))
        return len(rows)

    def _expired(self, row: HeldTrigger) -> bool:
        too_old = row.event_at < utcnow() - timedelta(seconds=self.limits.max_age_s)
        return too_old or row.attempts > self.limits.max_attempts

    async def _replay(self, row: HeldTrigger) -> None:
        """Hand the kept event to the app as Slack would, and wait for its listener's work."""
        assert self.app is not None
        request = AsyncBoltRequest(
            body=json.loads(row.body), mode="socket_mode", context={REPLAY: row.attempts}
        )
        log.info("replaying a kept Slack event (%s, attempt %d)", row.key, row.attempts)
        with collecting() as started:
            await self.app.async_dispatch(request)
        await asyncio.gather(*started, return_exceptions=True)

    async def _give_up(self, row: HeldTrigger) -> None:
        body = json.loads(row.body)
        log.warning(
            "gave up a kept Slack event (%s, %s, %d replays): its sender is told",
            row.key,
            row.reason,
            row.attempts - 1,
        )
        await self._owe_notice(owner_of(row), body, full=False)


def _refusal(error: Exception) -> tuple[str, str | None] | None:
    """Slack's code (and scope) when `error` is Slack refusing the bot token."""
    if isinstance(error, RefusedTokenError):
        return error.code, error.scope
    if isinstance(error, TokenRefusedError):
        return error.code, error.needed
    # A scope one method lacks is told with its fix where it happens (bot.slack.triggers).
    if isinstance(error, PostError) and error.code in TOKEN_REFUSED - ONE_METHOD:
        return error.code, None
    refused = token_refusal(error, "-")
    if refused is None or refused.code in ONE_METHOD:
        return None
    return refused.code, refused.needed


async def _tell(surface: Surface, event: dict[str, Any], text: str) -> None:
    """`text` in the thread of the message the event is about (the one reacted to, or the post
    itself); only logged when Slack does not take it."""
    item = event.get("item") or event
    channel, ts = _channel(event), item.get("ts")
    if channel is None or not isinstance(ts, str):
        return
    try:
        await surface.poster.post(channel=channel, thread_ts=ts, message=posts.notice(text))
    except (PostError, TokenRefusedError) as error:
        log.error("could not tell thread %s in %s: %s", ts, channel, error)


def _duration(seconds: float) -> str:
    return f"{seconds:g} seconds" if seconds < 120 else f"{seconds / 60:g} minutes"


def replays(context: AsyncBoltContext) -> int:
    """How many times the request was replayed (0: as Slack sent it)."""
    return int(context.get(REPLAY) or 0)


def event_key_of(body: dict[str, Any]) -> str:
    return dedupe.event_key(str(body.get("event_id")))


def _sender(event: dict[str, Any]) -> str | None:
    user = event.get("user")
    return user if isinstance(user, str) and user else None


def _channel(event: dict[str, Any]) -> str | None:
    channel = event.get("channel") or (event.get("item") or {}).get("channel")
    return channel if isinstance(channel, str) and channel else None


def describe(body: dict[str, Any]) -> str:
    """An event for a log line: its kind, id, sender and channel (no text)."""
    event = body.get("event") or {}
    return (
        f"{event.get('type')} event {body.get('event_id')} by {_sender(event)} in {_channel(event)}"
    )


def what_was_asked(event: dict[str, Any]) -> str:
    """The event as its sender reads it: what they did, and where."""
    channel = _channel(event)
    where = f" in <#{channel}>" if channel else ""
    if event.get("type") == "reaction_added":
        return f"your :{kit.escape(str(event.get('reaction')))}: reaction{where}"
    if event.get("channel_type") == "im":
        return "your message to me"
    return f"your post{where}"


def ask_again(event: dict[str, Any]) -> str:
    if event.get("type") == "reaction_added":
        return "Remove the reaction and add it again."
    return "Post it again."
