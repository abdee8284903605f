"""The listeners of `/debate` and its two forms (the debate form, the channel's settings form),
and the texts they answer with."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.messages import helptext, kit, modals, posts
from bot.messages.kit import clip
from bot.slack.cancelling import stop_debate
from bot.slack.command_text import (
    CancelCommand,
    ConfigCommand,
    DebateCommand,
    HelpCommand,
    OpenDebateModal,
    parse_command,
    parse_config_form,
    parse_debate_form,
)
from bot.slack.errors import CommandError, FormError, NotAllowedError, said
from bot.slack.surface import Surface
from bot.slackweb.errors import PostError
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from bot.store.debate_tables import CancelSource, DebateSource
from engine.models import clean_text

CANNOT_POST = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
"""Slack's refusals of an ephemeral message in a channel the bot cannot post in."""


async def on_debate_command(
    ack: AsyncAck,
    command: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
    surface: Surface,
) -> None:
    """`/debate`: help, the settings, the debate form, a debate, or stopping one."""
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
        elif isinstance(parsed, CancelCommand):
            await _cancel(parsed, channel, user, surface)
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


async def _cancel(parsed: CancelCommand, channel: str, user: str, surface: Surface) -> None:
    """`/debate cancel ID`: the answer, or the refusal, for the person alone (an ephemeral
    message, as a Stop button's answer will be)."""
    try:
        text = await stop_debate(
            surface, debate_id=parsed.debate_id, user=user, source=CancelSource.COMMAND
        )
    except CommandError as error:
        text = f":warning: {said(error)}"
    except NotAllowedError as error:
        text = f":no_entry: {said(error)}"
    await tell_privately(surface, channel=channel, user=user, text=text)


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


def _people(ids: list[str]) -> str:
    return " ".join(kit.mention(p) for p in ids) or "none"


def settings_text(settings: ChannelSettings, defaults: ChannelDefaults) -> str:
    """A channel's settings as `/debate config` shows them, an unset value as its default."""
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
