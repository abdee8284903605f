"""Slack answered first: each listener runs in a task (`bot.slack.after_ack`) and Bolt is
answered the moment the listener acknowledges.

Before its `ack()` a listener only parses what the request holds, so the acknowledgement's
content is a parse error or nothing; what needs the store or Slack comes after, and its outcome
is told through `response_url`, an ephemeral message or a DM. Slack's retried or duplicated
event deliveries are dropped after their acknowledgement (the event id is stored in
`processed_trigger`), so no retry ever starts a second debate.

An event is acknowledged even when the store cannot say whether it was seen before: Slack sends
an event again, for minutes, until it is acknowledged, and a resend that found the store back
would queue a debate the person had been told was not queued. So the event's listener runs and
its answer is the whole truth: queued, or not queued and never to be, so post it again.

Arguments reach a listener the way Bolt documents: the wrapper Bolt calls names one parameter,
`args` (Bolt injects its `AsyncArgs`, every argument it offers), and the listener is called
with the ones it names: Bolt's (`ack`, `body`, `client`, `say`, ...) or what the middleware
put in the context (`surface`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncBoltContext
from slack_bolt.kwargs_injection.async_args import AsyncArgs
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.util.utils import get_name_for_callable
from slack_sdk.errors import SlackApiError

from bot.hosts.links import HostError
from bot.slack.after_ack import AfterAck
from bot.slack.errors import SlackLayerError
from bot.slack.failures import on_error
from bot.slack.surface import Surface
from bot.slackweb.errors import SlackWebError
from bot.store.errors import StoreError

log = logging.getLogger(__name__)

REDELIVERY_CHECK_S = 1.5
"""The longest the check for a redelivered event waits for the store before the event is
handled anyway (Slack was answered already; the listener then meets the slow store itself and
says so)."""
OUTSIDE_FAILURES = (StoreError, SlackLayerError, SlackWebError, HostError, SlackApiError)
BOLT_ARGUMENTS = frozenset(inspect.get_annotations(AsyncArgs))
"""The arguments Bolt injects by name (`AsyncArgs` declares each)."""
CONTEXT_ARGUMENTS = frozenset({"surface"})
"""What the middleware puts in each request's context for listeners (bot.slack.middleware)."""

Listener = Callable[..., Awaitable[None]]
Acknowledged = Callable[[AsyncArgs], Awaitable[None]]


def acknowledging(listener: Listener) -> Acknowledged:
    """`listener`, run so that Slack is answered as soon as it acknowledges
    (`bot.slack.after_ack`): in a task the process keeps, this returning to Bolt once the
    listener has called `ack()` (at once for an event, which Bolt acknowledges when this
    returns). In the task, a redelivered event is dropped, and a failure of the outside (the
    store, Slack, a code host), or any failure once Slack was answered, goes to `on_error`; a
    bug before the acknowledgement reaches Bolt, whose error handler is the same `on_error`,
    and Slack gets a 500. Raises TypeError at registration for a parameter that neither Bolt
    nor the middleware provides."""
    wanted = argument_names(listener)

    async def first_ack(args: AsyncArgs) -> None:
        answered = asyncio.Event()
        surface: Surface = args.context["surface"]
        arguments = {name: _argument(args, name) for name in wanted}
        if "ack" in wanted:
            arguments["ack"] = _telling(args.ack, answered, surface.after_ack)
        else:
            answered.set()
        task = surface.after_ack.start(
            _after_ack(listener, arguments, args, answered), request=request_name(args.body)
        )
        if not answered.is_set():
            waiting = asyncio.ensure_future(answered.wait())
            try:
                await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
        if task.done() and not answered.is_set():
            task.result()  # the listener's bug, raised before it acknowledged

    # Bolt names a listener's logger and its log lines after the function it calls.
    first_ack.__name__ = first_ack.__qualname__ = get_name_for_callable(listener)
    return first_ack


def argument_names(listener: Listener) -> tuple[str, ...]:
    """The parameters `listener` names, each one Bolt injects or the middleware provides."""
    names = tuple(inspect.signature(listener).parameters)
    unknown = sorted(set(names) - BOLT_ARGUMENTS - CONTEXT_ARGUMENTS)
    if unknown:
        raise TypeError(
            f"{get_name_for_callable(listener)} takes {', '.join(unknown)}, which neither Bolt"
            " nor the middleware provides"
        )
    return names


def _argument(args: AsyncArgs, name: str) -> Any:
    """Bolt's argument `name`, or the context's (Bolt's own take precedence, as in Bolt)."""
    return getattr(args, name) if name in BOLT_ARGUMENTS else args.context[name]


def _telling(
    ack: AsyncAck, answered: asyncio.Event, after_ack: AfterAck
) -> Callable[..., Awaitable[Any]]:
    """`ack`, setting `answered` once it has run, and returning to the listener when the
    requests being answered give it its turn."""

    async def acknowledge(*args: Any, **kwargs: Any) -> Any:
        try:
            acknowledged = await ack(*args, **kwargs)
        finally:
            answered.set()
        await after_ack.turn()
        return acknowledged

    return acknowledge


async def _after_ack(
    listener: Listener,
    arguments: dict[str, Any],
    args: AsyncArgs,
    answered: asyncio.Event,
) -> None:
    body, context = args.body, args.context
    surface: Surface = context["surface"]
    try:
        if "ack" not in arguments:
            await surface.after_ack.turn()
        if await redelivered(body, surface, args.request, context):
            return
        await listener(**arguments)
    except OUTSIDE_FAILURES as error:
        if not answered.is_set() and "ack" in arguments:
            # A form whose check failed closes; `on_error` says what became of it.
            await arguments["ack"]()
        await on_error(error, body, context, args.respond)
    except Exception as error:
        if not answered.is_set():
            raise
        await on_error(error, body, context, args.respond)


def request_name(body: dict[str, Any]) -> str:
    """Which request `body` is, for a log line: its kind, who sent it and where (no text)."""
    if body.get("command"):
        return (
            f"{body['command']} by {body.get('user_id')} in {body.get('channel_id')},"
            f" trigger {body.get('trigger_id')}"
        )
    event = body.get("event")
    if isinstance(event, dict):
        where = event.get("channel") or (event.get("item") or {}).get("channel")
        return f"{event.get('type')} event {body.get('event_id')} by {event.get('user')} in {where}"
    user = (body.get("user") or {}).get("id")
    view = (body.get("view") or {}).get("callback_id")
    return f"{body.get('type')}{f' of {view}' if view else ''} by {user}"


async def redelivered(
    body: dict[str, Any],
    surface: Surface,
    request: AsyncBoltRequest,
    context: AsyncBoltContext,
) -> bool:
    """Whether `body` is an event Slack delivered again and that was handled already (it was
    acknowledged all the same, so Slack stops sending it). Only a handled event is marked (at
    the end of its listener), so one whose handler crashed is handled again when Slack retries
    it.

    When the store cannot answer (down, or slower than REDELIVERY_CHECK_S), the event is
    handled anyway (see the module's docstring); a trigger's unique key still keeps a second
    delivery from making a second debate. A resend handled so is marked `unchecked_resend`: an
    earlier delivery may have queued its debate."""
    event_id = body.get("event_id")
    if body.get("type") != "event_callback" or not event_id:
        return False
    try:
        seen = await asyncio.wait_for(surface.event_seen(event_id), REDELIVERY_CHECK_S)
    except (StoreError, TimeoutError) as error:
        log.warning(
            "event %s handled without knowing whether it was seen before: %s",
            event_id,
            str(error) or f"the store did not answer within {REDELIVERY_CHECK_S:g} s",
        )
        context["unchecked_resend"] = bool(request.headers.get("x-slack-retry-num"))
        return False
    if seen:
        log.info("event %s delivered again; ignored", event_id)
    return bool(seen)
