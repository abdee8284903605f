"""The messages a debate posts: its parent, long material, the verdict, the single answer of a
triage, notices, the review request and its decided form, and the DM fallbacks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.messages import receipt_file
from bot.messages.action_ids import (
    ACTION_ANOTHER_ROUND,
    ACTION_APPROVE,
    ACTION_DEBATE_ANYWAY,
    ACTION_FEEDBACK,
    ACTION_REJECT,
    ACTION_STOP,
)
from bot.messages.kit import (
    MAX_BLOCKS,
    MAX_FALLBACK_CHARS,
    Block,
    Message,
    bullets,
    clip,
    context,
    escape,
    fit,
    header,
    mention,
    paginate,
    plain,
    sections,
)
from engine.models import DebateResult, ThresholdSource, Verdict

PARENT_QUESTION_CHARS = 1500
STOPPABLE = frozenset({"queued", "running", "moderating"})
"""The parent's states of a debate that has not ended: its parent carries the Stop button."""


STATUS_EMOJI = {
    "queued": ":hourglass_flowing_sand:",
    "running": ":speech_balloon:",
    "moderating": ":scales:",
    "complete": ":white_check_mark:",
    "truncated_budget": ":warning:",
    "failed": ":x:",
    "cancelled": ":octagonal_sign:",
}


def status_line(status: str, detail: str = "") -> str:
    status = status.lower()
    emoji = STATUS_EMOJI.get(status, ":grey_question:")
    label = {
        "queued": "Queued",
        "running": "Debating",
        "moderating": "Moderating",
        "complete": "Done",
        "truncated_budget": "Stopped at the budget ceiling",
        "failed": "Failed",
        "cancelled": "Stopped",
    }.get(status, status)
    return f"{emoji} *{label}*" + (f" \u2014 {escape(detail)}" if detail else "")


def parent_message(
    *,
    debate_id: int,
    question: str,
    requested_by: str | None,
    protocol: str,
    max_rounds: int,
    status: str,
    detail: str = "",
    verdict: Verdict | None = None,
    cost_usd: float | None = None,
) -> Message:
    """The channel message a debate lives under; updated in place as the debate moves on."""
    shown = escape(clip(question, PARENT_QUESTION_CHARS))
    if len(question) > PARENT_QUESTION_CHARS:
        shown += "\n_(the full text is in the thread)_"
    who = f" for {mention(requested_by)}" if requested_by else ""
    blocks: list[Block] = [
        *sections(f":speaking_head_in_silhouette: *Debate #{debate_id}*{who}\n>{shown}"),
        context(f"protocol `{protocol}` \u00b7 up to {max_rounds} round(s)"),
        *sections(status_line(status, detail)),
    ]
    if verdict is not None:
        blocks += verdict_summary(verdict, cost_usd)
    elif status.lower() in STOPPABLE:
        blocks.append(stop_button(debate_id))
    return Message(f"Debate #{debate_id}: {escape(clip(question, 200))}", blocks)


SLACK_MENTION = re.compile(r"&lt;@([UW][A-Z0-9]{1,20})&gt;")
"""A user mention as `escape` left it (bounded: no backtracking)."""


def stopped_line(debate_id: int, reason: str | None) -> Block:
    """The line that ends a stopped debate's plan: who stopped it, from where and when (the
    store's `cancel_reason`), the person's mention kept as a mention."""
    said = SLACK_MENTION.sub(r"<@\1>", escape(reason or "stopped"))
    return context(f":octagonal_sign: Debate #{debate_id} was {said}.")


def stop_button(debate_id: int) -> Block:
    """*Stop* under a debate that has not ended: its requester, the channel's reviewers and
    workspace admins may press it (the server decides, bot.slack.cancelling); a confirmation
    first, since a stopped debate cannot go on. Gone once the debate ends (the ending's
    message has none)."""
    return {
        "type": "actions",
        "block_id": f"stop:{debate_id}",
        "elements": [
            {
                "type": "button",
                "action_id": ACTION_STOP,
                "text": plain("Stop"),
                "style": "danger",
                "value": str(debate_id),
                "accessibility_label": f"Stop debate #{debate_id}",
                "confirm": {
                    "title": plain("Stop this debate?"),
                    "text": plain(
                        f"Debate #{debate_id} ends now with what it has; what was spent stays"
                        " spent."
                    ),
                    "confirm": plain("Stop it"),
                    "deny": plain("Let it run"),
                    "style": "danger",
                },
            }
        ],
    }


def verdict_summary(verdict: Verdict, cost_usd: float | None = None) -> list[Block]:
    """The verdict in a few lines (decision, confidence, cost, the synthesis cut to 600
    characters): under the parent, and at the end of the debate's streamed plan."""
    summary = (
        f"*Decision:* `{verdict.decision.value}` \u00b7 *confidence* {verdict.confidence:.2f}"
        f" ({verdict.level.value})"
    )
    if cost_usd is not None:
        summary += f" \u00b7 cost ${cost_usd:.4f}"
    return [
        *sections(f"{summary}\n{escape(clip(verdict.synthesis, 600))}"),
        context("Full verdict, rounds and review in the thread."),
    ]


def material_messages(title: str, text: str) -> list[Message]:
    """Long user-supplied text (a 40,000-character question) posted whole, split into as many
    messages as Slack's limits need."""
    blocks = [header(title), *sections(escape(text))]
    return paginate(escape(title), blocks)


def verdict_messages(
    result: DebateResult,
    *,
    debate_id: int,
    seal: str | None = None,
    outcome: Sequence[Block] = (),
    receipted: bool = False,
    receipt_key: str | None = None,
    attached: bool = False,
) -> list[Message]:
    """The verdict in the thread: synthesis, the protocol's own `outcome`, confidence and its
    method, open points, cost, the start of the audit seal, so a copy of it lives outside
    the database, and, when it has one, its receipt (`receipt_key` signed it, None: unsigned):
    `attached` as a file in the thread (bot.messages.receipt_file), else how to download it."""
    v = result.verdict
    blocks: list[Block] = [header(f"Verdict of debate #{debate_id}")]
    blocks += sections(status_line(v.status.value, result.error or ""))
    why = confidence_line(v)
    held = threshold_text(v)
    blocks += sections(
        f"*Decision:* `{v.decision.value}`\n*Confidence:* {v.confidence:.2f} ({v.level.value})"
        + (f" \u00b7 {held}" if held else "")
        + (f"\n{escape(why)}" if why else "")
    )
    blocks += sections(f"*Synthesis*\n{escape(v.synthesis)}")
    blocks += outcome
    if v.confidence_method:
        steps = [f"{step.delta:+.2f} {step.reason}" for step in v.confidence_method]
        blocks += sections(f"*{method_title(v)}*\n{bullets(steps)}")
    if v.unresolved_points:
        blocks += sections(f"*Unresolved points*\n{bullets(v.unresolved_points)}")
    if v.uncertainties:
        blocks += sections(f"*Uncertainties*\n{bullets(v.uncertainties)}")
    if result.flags:
        blocks += sections("*Flags:* " + ", ".join(f"`{flag.value}`" for flag in result.flags))
    unverified = [check.quote for check in result.citations if not check.verified]
    if unverified:
        blocks += sections(f"*Citations not found in the material*\n{bullets(unverified)}")
    usage = result.usage
    blocks.append(
        context(
            f"cost ${result.cost_usd:.4f} \u00b7 {usage.input_tokens:,} input /"
            f" {usage.output_tokens:,} output tokens \u00b7 {len(result.transcript)} turns"
            f" \u00b7 `debatebot export {debate_id}` for the full record"
            + (f" \u00b7 audit seal `{seal[:16]}`" if seal else "")
        )
    )
    if receipted:
        signed = f"signed with key `{receipt_key}`" if receipt_key else "UNSIGNED (no receipt key)"
        where = (
            f"attached below in this thread as `{receipt_file.file_name(debate_id)}`"
            if attached
            else f"`debatebot export {debate_id} --format receipt` downloads it"
        )
        blocks.append(
            context(
                f":receipt: Receipt {signed}: {where}; anyone checks it with {receipt_file.VERIFY}"
            )
        )
    pages = paginate(f"Verdict: {v.decision.value} ({v.confidence:.2f})", blocks)
    last = pages[-1]
    pages[-1] = Message(last.text, [*last.blocks, feedback_buttons(debate_id)])
    return pages


def confidence_line(verdict: Verdict) -> str:
    """What the confidence is made of, in one line a reviewer reads in a second ("judges agree
    1 of 3 · 2 of 5 citations not found · 3 of 4 objections unanswered"); empty for a verdict
    scored before its components were kept."""
    return verdict.components.line() if verdict.components is not None else ""


THRESHOLD_SOURCES = {
    ThresholdSource.CHANNEL: "the channel's threshold",
    ThresholdSource.GUARANTEED: "the guaranteed threshold adopted with the weights",
    ThresholdSource.RECOMMENDED: "the labels' recommended threshold adopted with the weights",
    ThresholdSource.FIXED: "the deployment's fixed threshold",
}


def threshold_text(verdict: Verdict) -> str:
    """Which escalation threshold the confidence was held against ("threshold 0.69: the
    guaranteed threshold adopted with the weights"); empty for verdicts that did not record
    it."""
    if verdict.threshold is None or verdict.threshold_source is None:
        return ""
    return f"threshold {verdict.threshold:.2f}: {THRESHOLD_SOURCES[verdict.threshold_source]}"


def method_title(verdict: Verdict) -> str:
    """The heading of the confidence's steps: for a verdict scored by weights, that each step
    adds to the logit."""
    if verdict.weights_version is None:
        return "How the confidence was reached"
    return (
        f"How the confidence was reached (weights {verdict.weights_version}: each line adds to"
        " the logit z; confidence = 1 / (1 + e^-z))"
    )


def feedback_buttons(debate_id: int) -> Block:
    """Slack's thumbs up and down under a verdict; each person's click is stored (once per
    person, a change of mind overwrites it) and counted per protocol."""

    def button(label: str, value: str, meaning: str) -> dict[str, Any]:
        return {
            "text": plain(label),
            "value": f"{value}:{debate_id}",
            "accessibility_label": f"{meaning} the verdict of debate #{debate_id}",
        }

    return {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": ACTION_FEEDBACK,
                "positive_button": button("Good verdict", "positive", "Mark as helpful"),
                "negative_button": button("Bad verdict", "negative", "Mark as not helpful"),
            }
        ],
    }


def answer_message(result: DebateResult, *, debate_id: int, taken: str | None = None) -> Message:
    """A triage's single answer, with why no debate was held and a *Debate anyway* button
    (replaced by `taken`, who started the debate, once someone has)."""
    v = result.verdict
    triaged = (result.report or {}).get("triage") or {}
    blocks: list[Block] = [header(f"Answered without a debate (#{debate_id})")]
    blocks += sections(
        f"*Answer:* `{v.decision.value}` \u00b7 *confidence* {v.confidence:.2f}\n"
        f"{escape(v.synthesis)}"
    )
    blocks += sections(
        f"*Why no debate:* {escape(str(triaged.get('reason', '')))}\n"
        f"task `{escape(str(triaged.get('task_type', 'other')))}` \u00b7 downside if wrong"
        f" {float(triaged.get('downside', 0.0)):.2f} \u2014"
        f" {escape(str(triaged.get('rationale', '')))}"
    )
    if taken is None:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    _button("Debate anyway", ACTION_DEBATE_ANYWAY, str(debate_id), "primary")
                ],
            }
        )
    else:
        blocks.append(context(taken))
    blocks.append(context(f"cost ${result.cost_usd:.4f} \u00b7 one call, no debate"))
    # Bounded parts (an answer of at most 2,000 characters): always one message.
    return Message(f"Answered without a debate: {v.decision.value}", blocks)


def notice(text: str) -> Message:
    """A short message from the bot itself (an error the thread should know about)."""
    return Message(clip(text, MAX_FALLBACK_CHARS), sections(text))


def escalation_message(
    *,
    escalation_id: int,
    debate_id: int,
    reasons: Sequence[str],
    reviewers: Sequence[str],
    confidence: float,
    another_round: bool = True,
    question: str | None = None,
    synthesis: str | None = None,
    sample: bool = False,
    made_of: str = "",
) -> Message:
    """The review request: who is asked, why, what the confidence is made of (`made_of`, one
    line), and the buttons (*Another round* only where the protocol can run one more round).
    Posted away from the debate's thread (a review channel), it carries the `question` and the
    verdict's `synthesis`, since the thread is not beside it. A `sample` (a verdict that did
    not escalate, drawn at random) says so in its heading, so nobody reads it as a doubt about
    the verdict."""
    who = " ".join(mention(person) for person in reviewers) or (
        "_No reviewers are configured for this channel; a workspace admin can decide, and"
        " `/debate config` sets reviewers._"
    )
    value = str(escalation_id)
    heading = (
        f":mag: *Sample review* for debate #{debate_id} (confidence {confidence:.2f}): this"
        " verdict did not need a review; it was drawn at random so its confidence can be"
        " checked. Approve if it stands, Reject if it does not."
        if sample
        else f":rotating_light: *Review needed* for debate #{debate_id} (confidence"
        f" {confidence:.2f})"
    )
    made = f"{escape(made_of)}\n" if made_of else ""
    blocks: list[Block] = [
        *sections(f"{heading}\n{made}{who}"),
        *sections(f"*Why*\n{fit(bullets(reasons), 2_500)}"),
        *(
            [
                *sections(f"*Question*\n>{fit(escape(question), 2_500)}"),
                *sections(f"*Synthesis*\n{fit(escape(synthesis or ''), 2_500)}"),
            ]
            if question
            else []
        ),
        {
            "type": "actions",
            "block_id": f"review:{escalation_id}",
            "elements": [
                _button("Approve", ACTION_APPROVE, value, "primary"),
                _button("Reject", ACTION_REJECT, value, "danger"),
                *([_button("Another round", ACTION_ANOTHER_ROUND, value, None)] * another_round),
            ],
        },
    ]
    title = "Sample review" if sample else "Review needed"
    return Message(f"{title} for debate #{debate_id}", blocks)


def direct(message: Message, *, channel_id: str, reason: str) -> Message:
    """A thread's message sent by DM instead, saying why it did not go to the thread."""
    preface = sections(
        f":incoming_envelope: This was meant for the debate's thread in <#{channel_id}>, but I"
        f" cannot post there ({escape(reason)}), so it comes to you directly."
    )
    return Message(message.text, [*preface, *message.blocks][:MAX_BLOCKS])


def reposted_parent(message: Message, *, old_link: str | None) -> Message:
    """The parent message again, after the original (or its thread) was deleted."""
    where = f"<{old_link}|its thread>" if old_link else "its thread"
    note = context(
        f":recycle: The original message of this debate was deleted; what was posted before"
        f" stays in {where}, and the debate continues here."
    )
    return Message(message.text, [*message.blocks, note][:MAX_BLOCKS])


def _button(label: str, action_id: str, value: str, style: str | None) -> Block:
    button: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


DECISION_LABEL = {
    "approved": ":white_check_mark: Approved",
    "rejected": ":no_entry: Rejected",
    "another_round": ":repeat: Another round requested",
}


def escalation_decided_message(
    *,
    debate_id: int,
    reasons: Sequence[str],
    decision: str,
    reviewer: str,
    note: str | None,
    decided_at: str,
    sample: bool = False,
) -> Message:
    """The review request after the decision: the buttons are gone, the decision is shown."""
    label = DECISION_LABEL.get(decision, decision)
    text = f"{label} by {mention(reviewer)} at {decided_at}"
    if note:
        text += f"\n>{fit(escape(note), 6_000)}"
    blocks = [
        *sections(f":rotating_light: *Review of debate #{debate_id}*"),
        *sections(
            f"*Why it was {'reviewed' if sample else 'escalated'}*\n{fit(bullets(reasons), 2_500)}"
        ),
        *sections(text),
    ]
    return Message(f"Debate #{debate_id}: {label}", blocks)
