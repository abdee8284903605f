"""The listeners of the buttons on the bot's messages and App Home: a review's Approve, Reject
and Another round (with the note form Approve and Reject open), a verdict's thumbs, *Debate
anyway* under a triage's answer, and *Adopt* on new confidence weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.messages import action_ids, kit, modals, posts
from bot.slack.command_text import form_value
from bot.slack.errors import CommandError, NotAllowedError, said
from bot.slack.surface import Surface
from bot.store import dedupe
from bot.store.review_tables import EscalationState

NOTE_FORM_WINDOW_S = 10.0
"""A second click on Approve or Reject within this many seconds opens no second note form."""
REVIEW_DECISIONS = {
    action_ids.ACTION_APPROVE: EscalationState.APPROVED,
    action_ids.ACTION_REJECT: EscalationState.REJECTED,
    action_ids.ACTION_ANOTHER_ROUND: EscalationState.ANOTHER_ROUND,
}
"""A review button's action id, and the decision it stands for."""


@dataclass(frozen=True)
class Clicker:
    """Who clicked, and where: the channel and thread of the message their button is on."""

    user: str
    channel: str
    thread_ts: str | None

    @classmethod
    def on_message(cls, body: dict[str, Any]) -> Clicker:
        """The clicker of a button on a message in a channel."""
        message = body.get("message") or {}
        return cls(body["user"]["id"], body["channel"]["id"], message.get("thread_ts"))

    async def tell(self, surface: Surface, text: str) -> None:
        """`text` for the clicker alone, in the thread of the message they clicked on."""
        await surface.poster.ephemeral(
            channel=self.channel, user=self.user, text=text, thread_ts=self.thread_ts
        )


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
    clicker = Clicker.on_message(body)
    user = clicker.user
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
        await clicker.tell(surface, f":no_entry: {said(error)}")


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
    message = body.get("message") or {}
    message_ts = message.get("ts") or (body.get("container") or {}).get("message_ts")
    clicker = Clicker(
        body["user"]["id"], (body.get("channel") or {}).get("id", ""), message.get("thread_ts")
    )
    try:
        debate_id, changed = await surface.reviews.record_feedback(
            value=str(action.get("value", "")),
            user=clicker.user,
            channel=clicker.channel,
            message_ts=message_ts,
        )
    except NotAllowedError as error:
        await clicker.tell(surface, f":no_entry: {said(error)}")
        return
    thanks = "Thanks, noted" if changed else "Already noted"
    await clicker.tell(
        surface, f":memo: {thanks}: your feedback on the verdict of debate #{debate_id}."
    )


async def on_debate_anyway(
    ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], surface: Surface
) -> None:
    """*Debate anyway* under a triage's single answer: exactly one debate, however many clicks."""
    await ack()
    clicker = Clicker.on_message(body)
    user = clicker.user
    try:
        started = await surface.reviews.debate_anyway(debate_id=int(action["value"]), user=user)
    except CommandError as error:
        await clicker.tell(surface, f":warning: {said(error)}")
        return
    if not started.created:
        await clicker.tell(
            surface,
            f"The debate was already started: debate #{started.debate.id}, in this thread.",
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
