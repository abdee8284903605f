"""What each moment of a debate owes people, rendered as outbox drafts (values; nothing here
writes the store or calls Slack).

A new debate owes its parent (and, for a long question, the full text); each round owes one
threaded message; each turn refreshes the parent's live status and the plan streamed into the
thread; the ending owes the verdict, the parent's summary, the plan's final version (which
stops its stream) and, when the verdict escalates, the review request; a review owes the request
shown decided. The delivery loop's own notices (a message given up, a halted debate, a parent
posted again) are rendered here too. Every draft has a key, so owing one twice owes it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bot.messages import kit, posts, transcript
from bot.messages.plan import Plan, StreamContent
from bot.messages.receipt_file import receipt_file
from bot.messages.sessions import ENDED, session
from bot.store.debate_tables import Debate, DebateSource, DebateState
from bot.store.endings import Receipted
from bot.store.outbox import PARENT, PARENT_UPDATE, REVIEW, STREAM, Draft
from bot.store.outbox_tables import OutboxAction, OutboxFallback, OutboxTarget
from bot.store.review_tables import Escalation, EscalationState
from engine.events import RoundFinished
from engine.models import DebateResult, DebateSpec
from engine.protocols import definition_for

THREADED_SOURCES = frozenset(DebateSource) - {
    DebateSource.COMMAND,
    DebateSource.MODAL,
    DebateSource.CLI,
}
"""Debates asked for inside a thread: their parent is a status message in that thread. The
others (`/debate`, the form; the CLI's owe nothing) start a thread of their own with a
top-level parent."""
ANSWER = "answer"
ASSISTANT_STATUS = "status:assistant"
"""The assistant thread's status line as it was owed before agent sessions (a row written by an
older version, still delivered with `assistant.threads.setStatus`); new debates owe their
session's status instead (`bot.messages.sessions`), which carries the same line."""
LOADING_MESSAGES = (
    "Reading the debate so far\u2026",
    "Weighing the arguments\u2026",
    "Writing the next turn\u2026",
)
"""What the assistant thread's status rotates through while a model generates (Slack takes at
most 10, `assistant.threads.setStatus`'s `loading_messages`)."""


def has_thread(debate: Debate) -> bool:
    """Only a debate with a channel has a thread to post to; the CLI's have none."""
    return debate.channel_id is not None


def owes_messages(debate: Debate) -> bool:
    """A debate with a thread owes its messages there; one without (a coding agent's) owes only
    its review request, when it has a channel to send that to (DEBATEBOT_MCP_REVIEW_CHANNEL)."""
    return has_thread(debate) or debate.review_channel_id is not None


def opening(debate: Debate, spec: DebateSpec) -> list[Draft]:
    """A new debate's parent (a top-level message that starts the thread, or a status message
    in the thread it was asked from) and, for a question longer than the parent shows, its full
    text. A debate with no thread opens nothing."""
    if not has_thread(debate):
        return []
    target = OutboxTarget.THREAD if debate.source in THREADED_SOURCES else OutboxTarget.CHANNEL
    drafts = [draft(PARENT, parent(debate, spec, "queued"), target=target)]
    if len(spec.question) > posts.PARENT_QUESTION_CHARS:
        for n, part in enumerate(posts.material_messages("The full question", spec.question)):
            drafts.append(draft(f"material:{n}", part))
    return drafts


def status(debate: Debate, spec: DebateSpec, state: str, detail: str) -> Draft:
    """The parent's live status, as a coalesced update (only the newest one is sent)."""
    message = parent(debate, spec, state, detail)
    return draft(PARENT_UPDATE, message, action=OutboxAction.UPDATE, target_key=PARENT)


def round_finished(event: RoundFinished, spec: DebateSpec) -> list[Draft]:
    """A round's (or phase's) message, keyed by its slot so a replay owes nothing new."""
    slot = event.record.slot
    return [
        draft(f"round:{slot}" if n == 0 else f"round:{slot}:{n}", part)
        for n, part in enumerate(
            transcript.round_messages(event.record, max_rounds=spec.max_rounds)
        )
    ]


def closing(
    debate: Debate,
    result: DebateResult,
    escalation: Escalation | None,
    *,
    receipt: Receipted | None = None,
) -> list[Draft]:
    """What the end of a debate owes: the verdict, the parent's summary, and the review request
    when the verdict escalates (by DM when the thread cannot be reached). `debate` is the row as
    the ending stored it (its seal), `escalation` the row it raised, `receipt` the receipt it
    issued."""
    assert debate.id is not None
    if not owes_messages(debate):
        return []
    if not has_thread(debate):
        # A coding agent's debate: nothing to post but the review request (the agent reads the
        # verdict over MCP).
        return [] if escalation is None else [_review_request(debate, result, escalation)]
    attached = receipt_files(debate, receipt.document if receipt is not None else None)
    if not ((result.report or {}).get("triage") or {}).get("debated", True):
        answer = posts.answer_message(result, debate_id=debate.id)
        summary = parent(debate, result.spec, "complete", result=result)
        return [
            draft(ANSWER, answer),
            *attached,
            draft(PARENT_UPDATE, summary, action=OutboxAction.UPDATE, target_key=PARENT),
            session(debate.id, result.spec, ENDED),
        ]
    drafts = [
        draft("verdict" if n == 0 else f"verdict:{n}", part)
        for n, part in enumerate(
            posts.verdict_messages(
                result,
                debate_id=debate.id,
                seal=debate.chain_head,
                outcome=transcript.outcome_sections(result),
                receipted=receipt is not None,
                receipt_key=receipt.key_id if receipt is not None else None,
                attached=bool(attached),
            )
        )
    ]
    drafts += attached
    summary = parent(debate, result.spec, result.verdict.status.value, result=result)
    drafts.append(draft(PARENT_UPDATE, summary, action=OutboxAction.UPDATE, target_key=PARENT))
    drafts.append(stream(Plan.of_result(debate.id, result).closed(result)))
    drafts.append(session(debate.id, result.spec, ENDED))
    if escalation is not None:
        drafts.append(_review_request(debate, result, escalation))
    return drafts


def receipt_files(debate: Debate, document: Mapping[str, Any] | None) -> list[Draft]:
    """The receipt `document` as a file in the debate's thread (none without a thread or a
    receipt): owed when the receipt is issued and each time a decision joins it."""
    if document is None or not has_thread(debate):
        return []
    assert debate.id is not None
    return [receipt_file(debate.id, document).draft()]


def _review_request(debate: Debate, result: DebateResult, escalation: Escalation) -> Draft:
    """The review request: in the thread, or in the review channel asked for (then with the
    question and synthesis, since the thread is not beside it)."""
    assert debate.id is not None
    assert escalation.id is not None
    elsewhere = debate.review_channel_id is not None
    request = posts.escalation_message(
        escalation_id=escalation.id,
        debate_id=debate.id,
        reasons=escalation.reasons,
        reviewers=escalation.reviewers,
        confidence=result.verdict.confidence,
        # Another round continues in the debate's thread: a debate without one has none.
        another_round=has_thread(debate)
        and definition_for(result.spec.protocol).flags.another_round,
        question=result.spec.question if elsewhere else None,
        synthesis=result.verdict.synthesis,
        sample=escalation.sample,
        made_of=posts.confidence_line(result.verdict),
    )
    return draft(
        REVIEW,
        request,
        fallback=OutboxFallback.REVIEWERS,
        recipients=escalation.reviewers,
        target=OutboxTarget.CHANNEL if elsewhere else OutboxTarget.THREAD,
        channel=debate.review_channel_id,
    )


def answer_taken(debate: Debate, result: DebateResult, user: str, started_id: int) -> Draft:
    """The single answer shown with who started the debate anyway, instead of the button."""
    assert debate.id is not None
    taken = (
        f":speaking_head_in_silhouette: {kit.mention(user)} asked for the debate anyway:"
        f" debate #{started_id}, in this thread."
    )
    message = posts.answer_message(result, debate_id=debate.id, taken=taken)
    return draft(f"update:{ANSWER}", message, action=OutboxAction.UPDATE, target_key=ANSWER)


def another_round(number: int, fork_id: int) -> Draft:
    """Said in the thread when a reviewer asks for one more round."""
    text = f":repeat: Round {number} requested; it continues here as debate #{fork_id}."
    return draft(f"notice:another_round:{fork_id}", posts.notice(text))


def decided(
    escalation: Escalation,
    debate: Debate,
    *,
    reviewer: str,
    decision: EscalationState,
    note: str | None,
    at: datetime,
) -> list[Draft]:
    """The review request shown decided: who, what, when, the note; no buttons."""
    message = posts.escalation_decided_message(
        debate_id=debate.id or 0,
        reasons=escalation.reasons,
        decision=decision,
        reviewer=reviewer,
        note=note or None,
        decided_at=at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        sample=escalation.sample,
    )
    return [draft(f"update:{REVIEW}", message, action=OutboxAction.UPDATE, target_key=REVIEW)]


def reminder(escalation: Escalation, debate: Debate, periods: int, age_h: float) -> Draft:
    """A review still waiting, keyed by how many reminder periods have passed."""
    who = " ".join(kit.mention(p) for p in escalation.reviewers)
    text = (
        f":bell: Debate #{debate.id} has waited {age_h:.1f} h for a review."
        f" {who or 'A workspace admin'} can decide with the buttons on the review request."
    )
    return draft(
        f"reminder:{periods}",
        posts.notice(text),
        fallback=OutboxFallback.REVIEWERS,
        recipients=escalation.reviewers,
    )


def expired(escalation: Escalation, debate: Debate, owners: list[str], sla_h: float) -> list[Draft]:
    """A review past its SLA: said in the thread (by DM to the reviewers when the thread is
    gone), and sent to the channel's owners."""
    reviewers = " ".join(kit.mention(p) for p in escalation.reviewers) or "No reviewer"
    text = (
        f":hourglass: The review of debate #{debate.id} expired: nobody decided it within"
        f" {sla_h:g} h. The verdict stands unreviewed; {reviewers} can still decide it with"
        " the buttons on the review request."
    )
    drafts = [
        draft(
            "expired",
            posts.notice(text),
            fallback=OutboxFallback.REVIEWERS,
            recipients=escalation.reviewers,
        )
    ]
    if owners:
        link = f"<#{debate.channel_id}>" if debate.channel_id else "its channel"
        note = posts.notice(f"{text}\nYou get this as an owner of {link}'s debate settings.")
        drafts.append(draft("expired:owners", note, target=OutboxTarget.DM, recipients=owners))
    return drafts


def given_up(debate_id: int | None, key: str, code: str) -> Draft:
    """Said in the thread when Slack refused one of the debate's messages for good."""
    text = (
        f":warning: Part of debate #{debate_id} could not be posted here ({code})."
        f" The debate goes on and is recorded in full: `debatebot export {debate_id}`."
    )
    return draft(f"notice:{key}", posts.notice(text))


def halted(debate: Debate, reason: str, bot_name: str) -> Draft:
    """The requester's DM when the debate's thread cannot be reached and the debate stops."""
    assert debate.requested_by is not None
    text = (
        f":warning: Debate #{debate.id} {reason}, so it stops at its next turn and nothing more"
        f" is spent on it. Invite me with `/invite @{bot_name}` and ask again; what it produced"
        f" is recorded in full: `debatebot export {debate.id}`."
    )
    return draft(
        "dm:halted", posts.notice(text), target=OutboxTarget.DM, recipients=[debate.requested_by]
    )


def reposted_parent(debate: Debate, spec: DebateSpec, old_link: str | None) -> kit.Message:
    """The parent posted again at the top level because the old one (or its thread) is gone,
    with its current status and a link to the old thread when there is one."""
    state = "running" if debate.state != DebateState.FINISHED else (debate.outcome or "complete")
    return posts.reposted_parent(parent(debate, spec, state), old_link=old_link)


def stream(content: StreamContent) -> Draft:
    """The debate's plan as it stands, owed to its stream (a newer version replaces it); it
    follows the parent, so the stream starts in the thread once the parent is there."""
    text, blocks = content.stored()
    return Draft(
        key=STREAM, text=text, blocks=blocks, action=OutboxAction.STREAM, target_key=PARENT
    )


def parent(
    debate: Debate,
    spec: DebateSpec,
    state: str,
    detail: str = "",
    result: DebateResult | None = None,
) -> kit.Message:
    """The message a debate lives under, in `state`."""
    assert debate.id is not None
    return posts.parent_message(
        debate_id=debate.id,
        question=spec.question,
        requested_by=debate.requested_by,
        protocol=spec.protocol,
        max_rounds=spec.max_rounds,
        status=state,
        detail=detail,
        verdict=result.verdict if result else None,
        cost_usd=result.cost_usd if result else None,
    )


def draft(
    key: str,
    message: kit.Message,
    *,
    target: OutboxTarget = OutboxTarget.THREAD,
    action: OutboxAction = OutboxAction.POST,
    target_key: str | None = None,
    fallback: OutboxFallback = OutboxFallback.NONE,
    recipients: list[str] | None = None,
    channel: str | None = None,
) -> Draft:
    """`message` as a draft owed under `key`."""
    return Draft(
        key=key,
        text=message.text,
        blocks=message.blocks,
        target=target,
        action=action,
        target_key=target_key,
        fallback=fallback,
        recipients=tuple(recipients or ()),
        channel=channel,
    )
