"""Bolt listeners: acknowledge at once, parse, hand the work to `SlackDebates`, tell the user.

Listeners stay thin; a middleware drops Slack's retried or duplicated event deliveries (the
event id is stored in `processed_trigger`), so no retry ever starts a second debate.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import blocks, payloads
from bot.slack.blocks import clip
from bot.slack.commands import (
    ConfigCommand,
    DebateCommand,
    HelpCommand,
    OpenDebateModal,
    parse_budget,
    parse_command,
    parse_people,
    parse_protocol,
    parse_reaction,
    parse_rounds,
    parse_threshold,
)
from bot.slack.debates import SlackDebates
from bot.slack.errors import CommandError, NotAllowedError, PostError
from bot.store import slack as store
from bot.store.errors import StoreError, StoreRefusedError
from bot.store.tables import ChannelSettings, EscalationState
from engine.models import clean_text

log = logging.getLogger(__name__)

NOTE_FORM_WINDOW_S = 10.0
"""A second click on Approve or Reject within this many seconds opens no second note form."""

STORE_REFUSED = (
    ":x: The debate store refused this request, so nothing was queued. Remove unusual"
    " characters from it and try again; if it keeps happening, tell the bot's admin."
)
STORE_DOWN = (
    ":x: The debate store is unavailable, so nothing was queued. Try again in a minute; an admin"
    " should check the bot's DEBATEBOT_DATABASE_URL."
)


def _said(error: CommandError | NotAllowedError) -> str:
    """An error as the user reads it: a command error can quote what they typed, so it is
    escaped; a refusal is built from stored ids and mentions reviewers on purpose."""
    return blocks.escape(str(error)) if isinstance(error, CommandError) else str(error)


def _people(ids: list[str]) -> str:
    return " ".join(blocks.mention(p) for p in ids) or "none"


def _settings_text(settings: ChannelSettings) -> str:
    budget = "none" if settings.budget_usd is None else f"${settings.budget_usd:g}"
    adr = "on" if settings.adr_watch else "off"
    return (
        f"*Debate settings for <#{settings.channel_id}>*\n"
        f"protocol `{settings.protocol}` \u00b7 rounds {settings.rounds} \u00b7 threshold"
        f" {settings.threshold:g} \u00b7 budget {budget} \u00b7 adr {adr}"
        f" \u00b7 reaction :{settings.trigger_reaction}:\n"
        f"reviewers: {_people(settings.reviewers)}\nowners: {_people(settings.owners)}"
    )


def _unreadable_thread(error: SlackApiError, channel: str, ts: str) -> str:
    """Log a failed thread read and say what to do about it."""
    code = error.response.get("error")
    log.error("reading thread %s in %s failed: %s", ts, channel, code)
    return (
        f":warning: I could not read this thread ({code}); add me to the channel, or ask an"
        " admin to reinstall the app with the scopes in slack/manifest.yml."
    )


def _value(view: dict[str, Any], block_id: str) -> Any:
    action = view["state"]["values"].get(block_id, {}).get("value", {})
    if action.get("type") == "static_select":
        return (action.get("selected_option") or {}).get("value")
    if action.get("type") == "checkboxes":
        return [o["value"] for o in action.get("selected_options") or []]
    return clean_text(action.get("value") or "").strip()


def register(app: AsyncApp, debates: SlackDebates) -> None:
    """Attach every listener of the bot to `app`."""
    protocols = debates.protocols

    async def reject_malformed(
        body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        why = payloads.problem(body)
        if why is not None:
            log.warning("malformed Slack request refused: %s", why)
            return BoltResponse(status=400, body=f"malformed request: {why}")
        await next()
        return None

    async def drop_redeliveries(
        body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        # Only a handled event is marked (at the end of its listener): one whose handler
        # crashed is handled again when Slack retries it.
        event_id = body.get("event_id")
        if body.get("type") == "event_callback" and event_id:
            seen = await debates.db(lambda s: store.was_processed(s, key=f"event:{event_id}"))
            if seen:
                log.info("event %s delivered again; ignored", event_id)
                return BoltResponse(status=200, body="")
        await next()
        return None

    async def handled(body: dict[str, Any]) -> None:
        if event_id := body.get("event_id"):
            await debates.db(lambda s: store.mark_processed(s, key=f"event:{event_id}"))

    app.middleware(reject_malformed)
    app.middleware(drop_redeliveries)

    @app.command("/debate")
    async def on_debate(
        ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        try:
            typed = clean_text(blocks.unescape(command.get("text", "")))
            parsed = parse_command(typed, protocols=protocols)
        except CommandError as error:
            await ack(
                response_type="ephemeral", text=f":warning: {_said(error)}. Nothing was queued."
            )
            return
        channel, user = command["channel_id"], command["user_id"]
        if isinstance(parsed, HelpCommand):
            current = await debates.settings_of(channel)
            await ack(
                response_type="ephemeral",
                text=blocks.help_text(protocols=protocols, reaction=current.trigger_reaction),
            )
            return
        await ack()
        try:
            if isinstance(parsed, OpenDebateModal):
                await debates.check_reachable(channel)
                current = await debates.settings_of(channel)
                await client.views_open(
                    trigger_id=command["trigger_id"],
                    view=blocks.debate_modal(
                        channel_id=channel,
                        protocols=protocols,
                        protocol=current.protocol,
                        rounds=current.rounds,
                    ),
                )
            elif isinstance(parsed, ConfigCommand):
                await _config(parsed, channel, user, command["trigger_id"], respond, client)
            elif isinstance(parsed, DebateCommand):
                await debates.start_from_command(
                    command=parsed,
                    channel=channel,
                    user=user,
                    trigger_key=f"command:{command['trigger_id']}",
                    source="command",
                )
        except (CommandError, NotAllowedError) as error:
            await respond(response_type="ephemeral", text=f":warning: {_said(error)}")
        except StoreRefusedError:
            log.exception("/debate in %s: the store refused the request", channel)
            await respond(response_type="ephemeral", text=STORE_REFUSED)
        except StoreError:
            log.exception("/debate in %s: store failure", channel)
            await respond(response_type="ephemeral", text=STORE_DOWN)

    async def _config(
        parsed: ConfigCommand,
        channel: str,
        user: str,
        trigger_id: str,
        respond: AsyncRespond,
        client: AsyncWebClient,
    ) -> None:
        current = await debates.settings_of(channel)
        if parsed.action == "show":
            await respond(response_type="ephemeral", text=_settings_text(current))
        elif parsed.action == "set":
            saved = await debates.configure(channel=channel, user=user, values=parsed.values)
            await respond(
                response_type="ephemeral",
                text=f":white_check_mark: Saved.\n{_settings_text(saved)}",
            )
        else:
            await client.views_open(
                trigger_id=trigger_id,
                view=blocks.config_modal(settings=current, protocols=protocols),
            )

    @app.view(blocks.VIEW_DEBATE)
    async def on_debate_modal(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        channel, user = view["private_metadata"], body["user"]["id"]
        errors: dict[str, str] = {}
        question = _value(view, "question")
        command = None
        try:
            protocol = parse_protocol(_value(view, "protocol") or "", protocols)
        except CommandError as error:
            errors["protocol"] = str(error)
            protocol = None
        try:
            rounds = parse_rounds(_value(view, "rounds") or "1")
        except CommandError as error:
            errors["rounds"] = str(error)
            rounds = None
        budget_text = _value(view, "budget")
        try:
            budget = parse_budget(budget_text) if budget_text else None
        except CommandError as error:
            errors["budget"] = str(error)
            budget = None
        stances_for = tuple(
            s.strip() for s in _value(view, "stances_for").splitlines() if s.strip()
        )
        stances_against = tuple(
            s.strip() for s in _value(view, "stances_against").splitlines() if s.strip()
        )
        if (stances_for or stances_against) and protocol != "stances":
            errors["stances_for"] = "stances need the stances protocol"
        if not question:
            errors["question"] = "write the question the debate should decide"
        if not errors:
            command = DebateCommand(
                question=question,
                protocol=protocol,
                rounds=rounds,
                budget_usd=budget,
                stances_for=stances_for,
                stances_against=stances_against,
            )
        if command is None:
            await ack(response_action="errors", errors=errors)
            return
        try:
            await debates.check_reachable(channel)
        except CommandError as error:
            await ack(response_action="errors", errors={"question": clip(str(error), 150)})
            return
        await ack()
        try:
            await debates.start_from_command(
                command=command,
                channel=channel,
                user=user,
                trigger_key=f"modal:{view['id']}",
                source="modal",
                reachable=True,
            )
        except CommandError as error:
            await debates.poster.ephemeral(
                channel=channel, user=user, text=f":warning: {_said(error)}"
            )

    @app.view(blocks.VIEW_CONFIG)
    async def on_config_modal(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        channel, user = view["private_metadata"], body["user"]["id"]
        errors: dict[str, str] = {}
        values: dict[str, Any] = {}
        readers: dict[str, tuple[str, Callable[[str], Any]]] = {
            "protocol": ("protocol", lambda raw: parse_protocol(raw, protocols)),
            "rounds": ("rounds", parse_rounds),
            "threshold": ("threshold", parse_threshold),
            "reviewers": ("reviewers", parse_people),
            "owners": ("owners", parse_people),
            "budget": ("budget_usd", lambda raw: parse_budget(raw) if raw else None),
            "reaction": ("trigger_reaction", parse_reaction),
        }
        for block_id, (name, read) in readers.items():
            try:
                values[name] = read(_value(view, block_id) or "")
            except CommandError as error:
                errors[block_id] = str(error)
        values["adr_watch"] = "on" in (_value(view, "adr") or [])
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        current = await debates.settings_of(channel)
        if not await debates.directory.may_configure(user, current.owners):
            await ack(
                response_action="errors",
                errors={
                    "protocol": "only workspace admins and this channel's owners can change these"
                },
            )
            return
        await ack()
        await debates.configure(channel=channel, user=user, values=values)
        await debates.poster.ephemeral(
            channel=channel, user=user, text=":white_check_mark: Debate settings saved."
        )

    async def on_review_button(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        escalation_id = int(action["value"])
        user, channel = body["user"]["id"], body["channel"]["id"]
        thread_ts = (body.get("message") or {}).get("thread_ts")
        decision = {
            blocks.ACTION_APPROVE: EscalationState.APPROVED,
            blocks.ACTION_REJECT: EscalationState.REJECTED,
            blocks.ACTION_ANOTHER_ROUND: EscalationState.ANOTHER_ROUND,
        }[action["action_id"]]
        try:
            await debates.authorize_review(escalation_id=escalation_id, user=user)
            existing = await debates.existing_review(escalation_id)
            if existing is not None:
                raise NotAllowedError(
                    f"this was already decided ({existing.decision}) by"
                    f" {blocks.mention(existing.reviewer)}; nothing was changed"
                )
            if decision is EscalationState.ANOTHER_ROUND:
                await debates.decide(
                    escalation_id=escalation_id, user=user, decision=decision, note=None
                )
            elif await debates.db(
                lambda s: store.open_window(
                    s, key=f"note-form:{escalation_id}:{user}", window_s=NOTE_FORM_WINDOW_S
                )
            ):
                await client.views_open(
                    trigger_id=body["trigger_id"],
                    view=blocks.review_note_modal(escalation_id=escalation_id, decision=decision),
                )
        except (CommandError, NotAllowedError) as error:
            await debates.poster.ephemeral(
                channel=channel, user=user, text=f":no_entry: {_said(error)}", thread_ts=thread_ts
            )

    for action_id in (blocks.ACTION_APPROVE, blocks.ACTION_REJECT, blocks.ACTION_ANOTHER_ROUND):
        app.action(action_id)(on_review_button)

    @app.view(blocks.VIEW_REVIEW_NOTE)
    async def on_review_note(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        raw_id, _, decision = view["private_metadata"].partition(":")
        escalation_id, user = int(raw_id), body["user"]["id"]
        note = _value(view, "note") or None
        try:
            _, debate = await debates.authorize_review(escalation_id=escalation_id, user=user)
        except NotAllowedError:
            # Form errors are plain text, where a mention would show as raw `<@U…>`.
            await ack(
                response_action="errors",
                errors={"note": "Only this channel's reviewers can decide this review."},
            )
            return
        await ack()
        review, created = await debates.decide(
            escalation_id=escalation_id, user=user, decision=decision, note=note
        )
        if not created and debate.channel_id:
            await debates.poster.ephemeral(
                channel=debate.channel_id,
                user=user,
                thread_ts=debate.thread_ts,
                text=f":no_entry: already decided ({review.decision}) by <@{review.reviewer}>;"
                " nothing was changed",
            )

    @app.event("message")
    async def on_message(event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("subtype") or event.get("bot_id"):
            return
        if event.get("thread_ts") and event["thread_ts"] != event.get("ts"):
            return
        channel, ts = event["channel"], event["ts"]
        try:
            await debates.start_from_adr(
                channel=channel,
                ts=ts,
                user=event.get("user"),
                text=clean_text(blocks.unescape(event.get("text") or "")),
            )
        except CommandError as error:
            await _tell_thread(
                channel,
                ts,
                f":warning: This looks like an ADR, but I cannot debate it: {_said(error)}",
            )
        await handled(body)

    @app.event("reaction_added")
    async def on_reaction(event: dict[str, Any], body: dict[str, Any]) -> None:
        item = event.get("item") or {}
        if item.get("type") != "message":
            return
        channel, ts = item["channel"], item["ts"]
        try:
            await debates.start_from_reaction(
                channel=channel, ts=ts, user=event["user"], reaction=event["reaction"]
            )
        except CommandError as error:
            await _tell_thread(
                channel, ts, f":warning: I cannot debate this thread: {_said(error)}"
            )
        except SlackApiError as error:
            await _tell_thread(channel, ts, _unreadable_thread(error, channel, ts))
        await handled(body)

    @app.shortcut(blocks.SHORTCUT_DEBATE_THREAD)
    async def on_shortcut(ack: AsyncAck, shortcut: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        channel, ts = shortcut["channel"]["id"], shortcut["message"]["ts"]
        user = shortcut["user"]["id"]
        # The answer goes through response_url, which works where the bot is not a member.
        try:
            await debates.start_from_thread(channel=channel, ts=ts, user=user, source="shortcut")
        except CommandError as error:
            await respond(response_type="ephemeral", text=f":warning: {_said(error)}")
        except SlackApiError as error:
            await respond(response_type="ephemeral", text=_unreadable_thread(error, channel, ts))

    async def _tell_thread(channel: str, ts: str, text: str) -> None:
        try:
            await debates.poster.post(channel=channel, thread_ts=ts, message=blocks.notice(text))
        except PostError as error:
            log.error("could not tell thread %s in %s: %s", ts, channel, error)

    @app.event("app_home_opened")
    async def on_home(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        view = await debates.home(user=event["user"])
        await client.views_publish(user_id=event["user"], view=view)


def _lines(text: str) -> tuple[str, ...]:
    """The non-blank lines of a multi-line input (one stance per line)."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())
