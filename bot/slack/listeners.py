"""Bolt listeners: one top-level function per entry point, each parsing, acknowledging, handing
the work to the use cases (`bot.slack.surface`) and telling the user.

Slack is answered first (`bot.slack.after_ack`): before its `ack()` a listener only parses what
the request holds, so the acknowledgement's content is a parse error or nothing; what needs the
store or Slack (the channel's settings, whether the bot may post there, who may decide) comes
after, and its outcome is told through `response_url`, an ephemeral message or a DM, in the
words the acknowledgement used to carry. Each listener is wrapped by `acknowledging`, which
answers Bolt the moment the listener acknowledges and lets it go on in a task.

Cross-cutting work is middleware: malformed payloads are refused, and the use cases are put in
the request's context (listeners take `surface` as an argument, like Bolt's own `ack` or
`client`) with a `respond` on the process's pooled Slack session. Slack's retried or
duplicated event deliveries are dropped after their acknowledgement (the event id is stored in
`processed_trigger`), so no retry ever starts a second debate. `on_error` gives every listener
the same clear answer when the store fails: what is wrong (down, full, read-only, a refusal),
what became of the request and what to do.

An event is acknowledged even when the store cannot say whether it was seen before: Slack sends
an event again, for minutes, until it is acknowledged, and a resend that found the store back
would queue a debate the person had been told was not queued. So the event's listener runs and
its answer is the whole truth: queued, or not queued and never to be, so post it again.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import (
    AsyncAck,
    AsyncApp,
    AsyncBoltContext,
    AsyncRespond,
    AsyncSay,
    AsyncSetSuggestedPrompts,
)
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.hosts.links import HostError
from bot.messages import action_ids, helptext, kit, modals, posts
from bot.messages.kit import clip
from bot.slack import payloads
from bot.slack.after_ack import AfterAck
from bot.slack.assistant import build_assistant, on_context_changed, on_messages_tab
from bot.slack.command_text import (
    ConfigCommand,
    DebateCommand,
    HelpCommand,
    OpenDebateModal,
    form_value,
    parse_command,
    parse_config_form,
    parse_debate_form,
)
from bot.slack.errors import (
    CommandError,
    FormError,
    NotAllowedError,
    SlackLayerError,
    TokenNotRenewedError,
    said,
)
from bot.slack.installs import unrenewed_answer
from bot.slack.replies import PooledRespond
from bot.slack.surface import Surface, Surfaces
from bot.slack.thread_triggers import on_message, on_reaction, on_shortcut
from bot.slackweb.errors import PostError, SlackWebError
from bot.slackweb.poster import MeteredWebClient
from bot.store import dedupe
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from bot.store.debate_tables import DebateSource
from bot.store.errors import (
    DatabaseUnavailableError,
    StoreError,
    StoreFullError,
    StoreNoAnswerError,
    StoreReadOnlyError,
    StoreRefusedError,
)
from bot.store.review_tables import EscalationState
from bot.store.tenancy import PENDING_TEAM, Workspace
from engine.models import clean_text

log = logging.getLogger(__name__)

NOTE_FORM_WINDOW_S = 10.0
"""A second click on Approve or Reject within this many seconds opens no second note form."""

REDELIVERY_CHECK_S = 1.5
"""The longest the check for a redelivered event waits for the store before the event is
handled anyway (Slack was answered already; the listener then meets the slow store itself and
says so)."""
CANNOT_POST = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
"""Slack's refusals of an ephemeral message in a channel the bot cannot post in."""
OUTSIDE_FAILURES = (StoreError, SlackLayerError, SlackWebError, HostError, SlackApiError)
REVIEW_DECISIONS = {
    action_ids.ACTION_APPROVE: EscalationState.APPROVED,
    action_ids.ACTION_REJECT: EscalationState.REJECTED,
    action_ids.ACTION_ANOTHER_ROUND: EscalationState.ANOTHER_ROUND,
}
Next = Callable[[], Awaitable[None]]
Listener = Callable[..., Awaitable[None]]


def where_it_happened(body: dict[str, Any], enterprise_id: str | None) -> str | None:
    """The workspace a request from an org-wide install comes from when Bolt's `extract_team_id`
    named none, else the org's id. Each place is read in turn, a value equal to the org's id
    passed over:

    - `context_team_id`, then `team_id`: an event. Bolt reads its team from `authorizations[0]`
      alone, where an org-wide install has none; Slack's wrapper names "the workspace where the
      event occurred".
    - `user.team_id`: an interactivity payload whose `team` is null. Bolt reads it there too,
      so this finds one only when Bolt stopped at an earlier null (a `team_id` key, an
      `authorizations` entry).
    - `view.team_id`: a form. Bolt reads it only when there is no `user` object; here also when
      the user's `team_id` is missing.

    So an event, a click and a command in one of the org's workspaces are scoped to that
    workspace alike, not the events to the org and the commands to the workspace."""
    user, view = body.get("user"), body.get("view")
    for found in (
        body.get("context_team_id"),
        body.get("team_id"),
        user.get("team_id") if isinstance(user, dict) else None,
        view.get("team_id") if isinstance(view, dict) else None,
    ):
        if isinstance(found, str) and found and found != enterprise_id:
            return found
    return enterprise_id


def register(app: AsyncApp, surfaces: Surfaces, *, installs: bool = False) -> None:
    """Attach the middleware, the error handler and every listener of the bot to `app`. Each
    request gets the surface of its own workspace; with OAuth `installs`, on the client Bolt
    authorized for it (that workspace's token)."""

    async def prepare(
        body: dict[str, Any], context: AsyncBoltContext, next: Next
    ) -> BoltResponse | None:
        # One middleware, not three: Bolt builds every argument it could inject (some thirty,
        # the payload parsed several ways) anew for each middleware it calls.
        scrub_text(body)
        refusal = reject_malformed(body)
        if refusal is not None:
            return refusal
        bot_client(context, app.client)
        team = context.team_id or where_it_happened(body, context.enterprise_id) or PENDING_TEAM
        # One workspace owns the rows still waiting for its id too (bot.store.tenancy).
        workspace = Workspace(
            team_id=team, enterprise_id=context.enterprise_id, with_pending=not installs
        )
        provide_surface(context, surfaces.get(workspace, context.client if installs else None))
        await next()
        return None

    app.middleware(prepare)
    app.use(build_assistant(wrap=acknowledging))
    app.error(on_error)
    listen = acknowledging
    app.command("/debate")(listen(on_debate_command))
    app.view(action_ids.VIEW_DEBATE)(listen(on_debate_form))
    app.view(action_ids.VIEW_CONFIG)(listen(on_config_form))
    for action_id in REVIEW_DECISIONS:
        app.action(action_id)(listen(on_review_button))
    app.view(action_ids.VIEW_REVIEW_NOTE)(listen(on_review_note))
    app.action(action_ids.ACTION_FEEDBACK)(listen(on_feedback))
    app.action(action_ids.ACTION_DEBATE_ANYWAY)(listen(on_debate_anyway))
    app.action(action_ids.ACTION_ADOPT_WEIGHTS)(listen(on_adopt_weights))
    app.event("message")(listen(on_message))
    app.event("reaction_added")(listen(on_reaction))
    app.shortcut(action_ids.SHORTCUT_DEBATE_THREAD)(listen(on_shortcut))
    app.event("app_home_opened")(listen(on_home))
    app.event("app_context_changed")(listen(on_context_changed))


def acknowledging(listener: Listener) -> Listener:
    """`listener`, run so that Slack is answered as soon as it acknowledges
    (`bot.slack.after_ack`): in a task the process keeps, this returning to Bolt once the
    listener has called `ack()` (at once for an event, which Bolt acknowledges when this
    returns). In the task, a redelivered event is dropped, and a failure of the outside (the
    store, Slack, a code host), or any failure once Slack was answered, goes to `on_error`; a
    bug before the acknowledgement reaches Bolt, whose error handler is the same `on_error`,
    and Slack gets a 500."""
    wanted = inspect.getfullargspec(listener).args

    @functools.wraps(listener)
    async def first_ack(**kwargs: Any) -> None:
        answered = asyncio.Event()
        arguments = {name: kwargs[name] for name in wanted}
        surface: Surface = kwargs["context"]["surface"]
        if "ack" in wanted:
            arguments["ack"] = _telling(kwargs["ack"], answered, surface.after_ack)
        else:
            answered.set()
        body = kwargs["body"]
        task = surface.after_ack.start(
            _after_ack(listener, arguments, kwargs, answered), request=request_name(body)
        )
        if not answered.is_set():
            waiting = asyncio.ensure_future(answered.wait())
            try:
                await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
        if task.done() and not answered.is_set():
            task.result()  # the listener's bug, raised before it acknowledged

    # Bolt injects the arguments the wrapped function names, plus what the wrapper needs.
    first_ack.__wrapped__ = _with_arguments(wanted)
    return first_ack


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
    kwargs: dict[str, Any],
    answered: asyncio.Event,
) -> None:
    body, context, respond = kwargs["body"], kwargs["context"], kwargs.get("respond")
    surface: Surface = context["surface"]
    try:
        if "ack" not in arguments:
            await surface.after_ack.turn()
        if await redelivered(body, surface, kwargs["request"], context):
            return
        await listener(**arguments)
    except OUTSIDE_FAILURES as error:
        if not answered.is_set() and "ack" in arguments:
            # A form whose check failed closes; `on_error` says what became of it.
            await arguments["ack"]()
        await on_error(error, body, context, respond)
    except Exception as error:
        if not answered.is_set():
            raise
        await on_error(error, body, context, respond)


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


def _with_arguments(names: list[str]) -> Callable[..., Any]:
    """A stand-in whose signature names `names` and what the wrapper and the store answer
    need, for Bolt's argument injection (which reads the unwrapped signature)."""
    every = list(dict.fromkeys([*names, "body", "context", "respond", "request"]))
    parameters = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in every
    ]

    def stand_in(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("only its signature is read")

    stand_in.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return stand_in


# --- middleware and errors -----------------------------------------------------------------------


def scrub_text(body: dict[str, Any]) -> None:
    """Lone surrogates in any string of the payload become U+FFFD before anything reads it, on
    both transports: a review note or an ADR holding one would otherwise fail at the database
    or at Slack, after the person was told nothing or thanked."""
    if payloads.scrub(body):
        log.info("replaced lone surrogates in a Slack payload with U+FFFD")


def reject_malformed(body: dict[str, Any]) -> BoltResponse | None:
    """A payload without the fields its kind must have gets a 400, not a listener crash."""
    why = payloads.problem(body)
    if why is None:
        return None
    log.warning("malformed Slack request refused: %s", why)
    return BoltResponse(status=400, body=f"malformed request: {why}")


def bot_client(context: AsyncBoltContext, app_client: AsyncWebClient) -> None:
    """The request's client (what listeners, `say` and, with OAuth installs, the surface call
    Slack with) made the bot's kind, when the app's is (`MeteredWebClient`): its failures
    counted, and no call once the pooled session is closed. Bolt's own is a plain slack_sdk
    client on that session, which would then open a session of its own, following redirects
    with the token. Bolt builds it before any middleware and sets its token in authorization,
    both before this one; `say` (and a workflow step's `complete` and `fail`), which Bolt made
    on it to offer this middleware, are left to be made again on the new one."""
    if not isinstance(app_client, MeteredWebClient):
        return
    context["client"] = app_client.for_request(context.client)
    for made in ("say", "complete", "fail"):
        context.pop(made, None)


def provide_surface(context: AsyncBoltContext, surface: Surface) -> None:
    """The use cases in the request's context, and a `respond` on the pooled Slack session
    (Bolt's own would open a session, so a connection, for each answer)."""
    context["surface"] = surface
    if surface.slack_http is not None and context.response_url:
        context["respond"] = PooledRespond(
            response_url=context.response_url, session=surface.slack_http
        )


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
    earlier delivery may have queued its debate already."""
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


def store_answer(
    error: StoreError, *, event: dict[str, Any] | None = None, unchecked_resend: bool = False
) -> str:
    """What the person whose request met `error` is told: what is wrong, what became of the
    request, and what to do. `event` is the Slack event that was the request (an ADR post, a
    reaction), which Slack will not send again; `unchecked_resend` when it is a resend the
    store could not check, so an earlier delivery may have queued its debate."""
    if isinstance(error, StoreNoAnswerError) and error.may_have_stored:
        where = "this thread" if event is not None else "this channel"
        return (
            ":hourglass: The debate store stopped answering while this was being queued, so I"
            f" cannot tell whether it was. If it was, the debate starts in {where} once the store"
            " answers; if nothing appears there in a few minutes, try again. An admin should"
            " check the bot's database server and the network to it."
        )
    if isinstance(error, StoreRefusedError):
        cause = "The debate store refused this request"
        fix = "Remove unusual characters from it; if it keeps happening, tell the bot's admin"
    elif isinstance(error, StoreFullError):
        cause = "The bot's disk is full"
        fix = "An admin must free space on the disk that holds the debate store"
    elif isinstance(error, StoreReadOnlyError):
        cause = f"The debate store is read-only ({kit.escape(error.where)})"
        fix = "An admin must make it writable for the bot"
    else:
        cause = "The debate store is unavailable"
        fix = "An admin should check the bot's DEBATEBOT_DATABASE_URL"
    if event is None:
        return f":x: {cause}, so nothing was queued. {fix}; then try again."
    again = (
        "remove the reaction and add it again"
        if event.get("type") == "reaction_added"
        else "post it again"
    )
    if unchecked_resend:
        return (
            f":x: {cause}. If an earlier delivery of this already started a debate, it goes on"
            f" in this thread; if not, nothing was queued: {again} once this is fixed. {fix}."
        )
    return (
        f":x: {cause}, so nothing was queued, and nothing will be: {again} once this is fixed."
        f" {fix}."
    )


STORE_DOWN = store_answer(DatabaseUnavailableError())
STORE_REFUSED = store_answer(StoreRefusedError())


async def on_error(
    error: Exception,
    body: dict[str, Any],
    context: AsyncBoltContext,
    respond: AsyncRespond | None,
) -> BoltResponse | None:
    """Every listener's failure ends here, and, as Bolt's error handler, every middleware's. A
    store failure is told to the person who asked, the same way from every entry point
    (`store_answer`), and logged for the operator with what to do; a request turned away
    because its workspace's token could not be renewed is answered `unrenewed_answer`;
    anything else is logged with its payload kind."""
    if isinstance(error, TokenNotRenewedError):
        return await unrenewed_answer(body, context)
    surface: Surface | None = context.get("surface")
    if surface is not None and await surface.keep(error, body, context):
        return None  # an event Slack will not send again, kept for later (bot.slack.held)
    kind = body.get("type") or ("command" if body.get("command") else "request")
    if not isinstance(error, StoreError):
        log.error("listener failed on a %s payload", kind, exc_info=error)
        return None
    log.error("store failure on a %s payload: %s", kind, error)
    event = (body.get("event") or {}) if kind == "event_callback" else None
    text = store_answer(error, event=event, unchecked_resend=bool(context.get("unchecked_resend")))
    try:
        if respond is not None and context.response_url:
            await respond(response_type="ephemeral", text=text)
            return None
        # A form keeps the channel it was opened in as its private metadata.
        metadata = str((body.get("view") or {}).get("private_metadata") or "")
        channel = context.channel_id or (metadata if metadata[:1] in ("C", "G") else None)
        user = context.user_id
        if surface is None or channel is None:
            return None
        if event is not None and event.get("ts"):
            thread = event.get("thread_ts") or event["ts"]
            await surface.poster.post(channel=channel, thread_ts=thread, message=posts.notice(text))
        elif user and (event is None or event.get("type") == "reaction_added"):
            await surface.poster.ephemeral(channel=channel, user=user, text=text)
    except (PostError, SlackApiError) as failure:
        log.error("could not tell the user about the store failure: %s", failure)
    return None


def _people(ids: list[str]) -> str:
    return " ".join(kit.mention(p) for p in ids) or "none"


def settings_text(settings: ChannelSettings, defaults: ChannelDefaults) -> str:
    budget = "none" if settings.budget_usd is None else f"${settings.budget_usd:g}"
    monthly = "none" if settings.monthly_budget_usd is None else f"${settings.monthly_budget_usd:g}"
    sla = "default" if settings.review_sla_h is None else f"{settings.review_sla_h:g} h"
    digest = settings.digest_time or "off"
    rounds = f"{defaults.rounds} (default)" if settings.rounds is None else str(settings.rounds)
    threshold = (
        f"{defaults.threshold:g} (default)"
        if settings.threshold is None
        else f"{settings.threshold:g}"
    )

    def onoff(value: bool) -> str:
        return "on" if value else "off"

    return (
        f"*Debate settings for <#{settings.channel_id}>*\n"
        f"protocol `{settings.protocol}` \u00b7 rounds {rounds} \u00b7 threshold {threshold}"
        f" \u00b7 budget {budget} \u00b7 adr {onoff(settings.adr_watch)}"
        f" \u00b7 triage {onoff(settings.triage)} \u00b7 route {onoff(settings.route)}"
        f" \u00b7 reaction :{settings.trigger_reaction}:\n"
        f"monthly_budget {monthly} \u00b7 review_sla {sla} \u00b7 digest {digest}"
        f" \u00b7 timezone {settings.timezone} \u00b7 adr_pattern"
        f" {('`' + settings.adr_pattern + '`') if settings.adr_pattern else 'none'}\n"
        f"reviewers: {_people(settings.reviewers)}\nowners: {_people(settings.owners)}"
    )


async def tell_privately(
    surface: Surface, *, channel: str, user: str, text: str, thread_ts: str | None = None
) -> None:
    """`text` for `user` alone: an ephemeral message in `channel`, or a DM from the app where
    the bot cannot post (not a member, the channel archived), which is often what `text`
    says."""
    try:
        await surface.poster.ephemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
    except PostError as error:
        if error.code not in CANNOT_POST:
            raise
        await surface.poster.post(channel=user, message=posts.notice(text))


# --- /debate and its forms -----------------------------------------------------------------------


async def on_debate_command(
    ack: AsyncAck,
    command: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
    surface: Surface,
) -> None:
    """`/debate`: help, the settings, the debate form, or a debate."""
    protocols = surface.protocols
    try:
        typed = clean_text(kit.unescape(command.get("text", "")))
        parsed = parse_command(typed, protocols=protocols)
    except CommandError as error:
        await ack(response_type="ephemeral", text=f":warning: {said(error)}. Nothing was queued.")
        return
    await ack()
    channel, user = command["channel_id"], command["user_id"]
    if isinstance(parsed, HelpCommand):
        # The help names the channel's review reaction, which the store holds.
        current = await surface.channels.settings_of(channel)
        await respond(
            response_type="ephemeral",
            text=helptext.help_text(protocols=protocols, reaction=current.trigger_reaction),
        )
        return
    try:
        if isinstance(parsed, OpenDebateModal):
            await surface.starts.check_reachable(channel)
            current = await surface.channels.settings_of(channel)
            await client.views_open(
                trigger_id=command["trigger_id"],
                view=modals.debate_modal(
                    channel_id=channel,
                    protocols=protocols,
                    protocol=current.protocol,
                    rounds=current.rounds or surface.channels.defaults.rounds,
                ),
            )
        elif isinstance(parsed, ConfigCommand):
            await _config(parsed, channel, user, command["trigger_id"], respond, client, surface)
        elif isinstance(parsed, DebateCommand):
            await surface.starts.start_from_command(
                command=parsed,
                channel=channel,
                user=user,
                trigger_key=f"command:{command['trigger_id']}",
                source=DebateSource.COMMAND,
            )
    except (CommandError, NotAllowedError) as error:
        await respond(response_type="ephemeral", text=f":warning: {said(error)}")


async def _config(
    parsed: ConfigCommand,
    channel: str,
    user: str,
    trigger_id: str,
    respond: AsyncRespond,
    client: AsyncWebClient,
    surface: Surface,
) -> None:
    current = await surface.channels.settings_of(channel)
    if parsed.action == "show":
        await respond(
            response_type="ephemeral", text=settings_text(current, surface.channels.defaults)
        )
    elif parsed.action == "set":
        saved = await surface.channels.configure(channel=channel, user=user, values=parsed.values)
        await respond(
            response_type="ephemeral",
            text=f":white_check_mark: Saved.\n{settings_text(saved, surface.channels.defaults)}",
        )
    else:
        await client.views_open(
            trigger_id=trigger_id,
            view=modals.config_modal(
                settings=current, defaults=surface.channels.defaults, protocols=surface.protocols
            ),
        )


async def on_debate_form(
    ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], surface: Surface
) -> None:
    """The debate form: what is wrong with its fields shows under them; else it closes and the
    debate is queued, or the person is told privately why not (the channel, the spec, a
    limit)."""
    channel, user = view["private_metadata"], body["user"]["id"]
    try:
        command = parse_debate_form(view, protocols=surface.protocols)
        request = surface.starts.form_request(
            command=command, channel=channel, user=user, trigger_key=f"modal:{view['id']}"
        )
    except FormError as error:
        await ack(response_action="errors", errors=error.errors)
        return
    except CommandError as error:
        await ack(response_action="errors", errors={"question": clip(str(error), 150)})
        return
    await ack()
    try:
        await surface.starts.submit(request)
    except CommandError as error:
        await tell_privately(surface, channel=channel, user=user, text=f":warning: {said(error)}")


async def on_config_form(
    ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], surface: Surface
) -> None:
    """The settings form: what is wrong with its fields shows under them; else it closes, and
    the settings are saved if the person is an admin or one of the channel's owners, who is told
    privately either way."""
    channel, user = view["private_metadata"], body["user"]["id"]
    try:
        values = parse_config_form(view, protocols=surface.protocols)
    except FormError as error:
        await ack(response_action="errors", errors=error.errors)
        return
    await ack()
    try:
        await surface.channels.configure(channel=channel, user=user, values=values)
    except NotAllowedError as error:
        await tell_privately(surface, channel=channel, user=user, text=f":no_entry: {said(error)}")
        return
    await tell_privately(
        surface, channel=channel, user=user, text=":white_check_mark: Debate settings saved."
    )


# --- reviews -------------------------------------------------------------------------------------


async def on_review_button(
    ack: AsyncAck,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    surface: Surface,
) -> None:
    """Approve or Reject opens the note form (once per click burst); Another round decides."""
    await ack()
    escalation_id = int(action["value"])
    user, channel = body["user"]["id"], body["channel"]["id"]
    thread_ts = (body.get("message") or {}).get("thread_ts")
    decision = REVIEW_DECISIONS[action["action_id"]]
    try:
        await surface.reviews.authorize_review(escalation_id=escalation_id, user=user)
        existing = await surface.reviews.existing_review(escalation_id)
        if existing is not None:
            raise NotAllowedError(
                f"this was already decided ({existing.decision}) by"
                f" {kit.mention(existing.reviewer)}; nothing was changed"
            )
        if decision is EscalationState.ANOTHER_ROUND:
            await surface.reviews.decide(
                escalation_id=escalation_id, user=user, decision=decision, note=None
            )
        elif await surface.db(
            lambda s: dedupe.open_window(
                s, key=f"note-form:{escalation_id}:{user}", window_s=NOTE_FORM_WINDOW_S
            )
        ):
            await client.views_open(
                trigger_id=body["trigger_id"],
                view=modals.review_note_modal(escalation_id=escalation_id, decision=decision),
            )
    except (CommandError, NotAllowedError) as error:
        await surface.poster.ephemeral(
            channel=channel, user=user, text=f":no_entry: {said(error)}", thread_ts=thread_ts
        )


async def on_review_note(
    ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], surface: Surface
) -> None:
    """The note form's submission records the decision, once, if its sender may decide (who
    is told by DM when not: the form has closed, and the note form names no channel)."""
    raw_id, _, decision = view["private_metadata"].partition(":")
    escalation_id, user = int(raw_id), body["user"]["id"]
    note = form_value(view, "note") or None
    await ack()
    try:
        _, debate = await surface.reviews.authorize_review(escalation_id=escalation_id, user=user)
        review, created = await surface.reviews.decide(
            escalation_id=escalation_id, user=user, decision=decision, note=note
        )
    except NotAllowedError as refusal:  # not theirs to decide, or the request is gone
        await surface.poster.post(channel=user, message=posts.notice(f":no_entry: {said(refusal)}"))
        return
    if not created and debate.channel_id:
        await surface.poster.ephemeral(
            channel=debate.channel_id,
            user=user,
            thread_ts=debate.thread_ts,
            text=f":no_entry: already decided ({review.decision}) by <@{review.reviewer}>;"
            " nothing was changed",
        )


async def on_feedback(
    ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], surface: Surface
) -> None:
    """A thumbs up or down on a verdict: stored once per person, a change of mind overwrites."""
    await ack()
    user, channel = body["user"]["id"], (body.get("channel") or {}).get("id", "")
    message = body.get("message") or {}
    message_ts = message.get("ts") or (body.get("container") or {}).get("message_ts")
    thread_ts = message.get("thread_ts")
    try:
        debate_id, changed = await surface.reviews.record_feedback(
            value=str(action.get("value", "")), user=user, channel=channel, message_ts=message_ts
        )
    except NotAllowedError as error:
        await surface.poster.ephemeral(
            channel=channel, user=user, text=f":no_entry: {said(error)}", thread_ts=thread_ts
        )
        return
    thanks = "Thanks, noted" if changed else "Already noted"
    await surface.poster.ephemeral(
        channel=channel,
        user=user,
        thread_ts=thread_ts,
        text=f":memo: {thanks}: your feedback on the verdict of debate #{debate_id}.",
    )


async def on_debate_anyway(
    ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], surface: Surface
) -> None:
    """*Debate anyway* under a triage's single answer: exactly one debate, however many clicks."""
    await ack()
    user, channel = body["user"]["id"], body["channel"]["id"]
    thread_ts = (body.get("message") or {}).get("thread_ts")
    try:
        started = await surface.reviews.debate_anyway(debate_id=int(action["value"]), user=user)
    except CommandError as error:
        await surface.poster.ephemeral(
            channel=channel, user=user, text=f":warning: {said(error)}", thread_ts=thread_ts
        )
        return
    if not started.created:
        await surface.poster.ephemeral(
            channel=channel,
            user=user,
            thread_ts=thread_ts,
            text=f"The debate was already started: debate #{started.debate.id}, in this thread.",
        )


async def on_adopt_weights(
    ack: AsyncAck,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    surface: Surface,
) -> None:
    """*Adopt* on an admin's App Home: the server checks that the clicker is a workspace admin,
    then adopts the version; their App Home shows what happened."""
    await ack()
    user = body["user"]["id"]
    notice = await surface.home.adopt_weights(user=user, version=str(action.get("value", "")))
    view = await surface.home.view(user=user, notice=notice)
    await client.views_publish(user_id=user, view=view)


# --- triggers ------------------------------------------------------------------------------------


async def on_home(
    event: dict[str, Any],
    client: AsyncWebClient,
    say: AsyncSay,
    set_suggested_prompts: AsyncSetSuggestedPrompts | None,
    surface: Surface,
) -> None:
    """App Home: reviews waiting, recent debates with their feedback, spend. Its Messages tab
    is the agent's conversation (`agent_view`): a greeting and suggested prompts."""
    if event.get("tab") == "messages" and set_suggested_prompts is not None:
        await on_messages_tab(event, say, set_suggested_prompts, surface)
        return
    if event.get("tab", "home") != "home":
        return
    view = await surface.home.view(user=event["user"])
    await client.views_publish(user_id=event["user"], view=view)
