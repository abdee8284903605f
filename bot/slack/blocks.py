"""Block Kit builders. Every message they return fits Slack's limits: long content is split across
sections (3,000 characters each) and across messages (50 blocks and 12,000 characters of block
text each, well under the 40,000 of `text`); it is never cut off.

Slack sends `&`, `<` and `>` escaped; `unescape` undoes that once on the way in, so questions are
stored as people wrote them. On the way out, all text that came from people or models is escaped
once, in the blocks and in the notification `text`, so neither a thread nor a model's output can
produce a mention such as `<!channel>` or a disguised link.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.store.tables import ChannelSettings
from engine.models import DebateResult, Verdict

MAX_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_MESSAGE_CHARS = 12_000
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
MAX_CONTEXT_ELEMENT_CHARS = 2000
MAX_FALLBACK_CHARS = 3000
MAX_MODAL_TITLE_CHARS = 24
PARENT_QUESTION_CHARS = 1500

Block = dict[str, Any]

ACTION_APPROVE = "review_approve"
ACTION_REJECT = "review_reject"
ACTION_ANOTHER_ROUND = "review_another_round"
ACTION_FEEDBACK = "verdict_feedback"
ACTION_DEBATE_ANYWAY = "debate_anyway"
VIEW_DEBATE = "debate_modal"
VIEW_CONFIG = "config_modal"
VIEW_REVIEW_NOTE = "review_note_modal"
SHORTCUT_DEBATE_THREAD = "debate_this_thread"

STATUS_EMOJI = {
    "queued": ":hourglass_flowing_sand:",
    "running": ":speech_balloon:",
    "moderating": ":scales:",
    "complete": ":white_check_mark:",
    "truncated_budget": ":warning:",
    "failed": ":x:",
}


@dataclass(frozen=True)
class Message:
    """One chat message: notification text plus blocks."""

    text: str
    blocks: list[Block]


def escape(text: str) -> str:
    """Slack's mrkdwn escaping; stops model or user text from forming mentions and links."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Undo the escaping Slack applies to what people type (`&amp;` last, so `&amp;lt;` stays
    `&lt;` as typed). Mentions and links keep Slack's `<…>` form; `escape` shows them as text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fit(escaped: str, limit: int) -> str:
    """Escaped text cut to `limit` characters at a break, never inside an escape sequence;
    for a message that must stay one message (its buttons are updated in place)."""
    pieces = split_text(escaped, limit - 1)
    return pieces[0] + "\u2026" if len(pieces) > 1 else escaped


def split_text(text: str, limit: int = MAX_SECTION_CHARS) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at paragraph, line or word breaks."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind("\n\n"), -1)
        if cut < limit // 2:
            cut = window.rfind("\n")
        if cut < limit // 2:
            cut = window.rfind(" ")
        if cut < limit // 4:
            cut = limit
        # Never split an escape sequence such as "&amp;" in two.
        amp = window.rfind("&", max(0, cut - 5), cut)
        if amp != -1 and ";" not in window[amp:cut]:
            cut = amp
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def sections(mrkdwn: str, limit: int = MAX_SECTION_CHARS) -> list[Block]:
    """As many section blocks as `mrkdwn` needs."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": p}}
        for p in split_text(mrkdwn, limit)
    ]


def header(text: str) -> Block:
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip(text, MAX_HEADER_CHARS), "emoji": True},
    }


def context(mrkdwn: str) -> Block:
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": clip(mrkdwn, MAX_CONTEXT_ELEMENT_CHARS)}],
    }


def divider() -> Block:
    return {"type": "divider"}


def block_chars(value: Any) -> int:
    """Characters of text a block carries (every `text` string in it, however nested)."""
    if isinstance(value, dict):
        own = len(value["text"]) if isinstance(value.get("text"), str) else 0
        return own + sum(block_chars(v) for k, v in value.items() if k != "text" or own == 0)
    if isinstance(value, list):
        return sum(block_chars(item) for item in value)
    return 0


def paginate(
    text: str,
    blocks: Sequence[Block],
    max_blocks: int = MAX_BLOCKS,
    max_chars: int = MAX_MESSAGE_CHARS,
) -> list[Message]:
    """Split a block list into messages of at most `max_blocks` blocks and `max_chars`
    characters of block text each. `text` is mrkdwn the caller has escaped."""
    pages: list[list[Block]] = [[]]
    size = 0
    for block in blocks:
        chars = block_chars(block)
        if pages[-1] and (len(pages[-1]) >= max_blocks or size + chars > max_chars):
            pages.append([])
            size = 0
        pages[-1].append(block)
        size += chars
    fallback = clip(text, MAX_FALLBACK_CHARS)
    if len(pages) == 1:
        return [Message(fallback, pages[0])]
    return [
        Message(fallback if n == 1 else f"{clip(text, 200)} (part {n} of {len(pages)})", page)
        for n, page in enumerate(pages, start=1)
    ]


def resplit(message: Message) -> list[Message]:
    """A message Slack refused for its size, in smaller pieces: sections of at most 1,500
    characters, messages of at most 25 blocks and 6,000 characters."""
    smaller: list[Block] = []
    for block in message.blocks:
        body = block.get("text")
        if block.get("type") == "section" and isinstance(body, dict) and len(body["text"]) > 1500:
            smaller += sections(body["text"], limit=MAX_SECTION_CHARS // 2)
        else:
            smaller.append(block)
    return paginate(
        message.text, smaller, max_blocks=MAX_BLOCKS // 2, max_chars=MAX_MESSAGE_CHARS // 2
    )


def bullets(items: Iterable[str]) -> str:
    return "\n".join(f"\u2022 {escape(item)}" for item in items)


def mention(person: str) -> str:
    return f"<!subteam^{person}>" if person.startswith("S") else f"<@{person}>"


# --- debate messages -----------------------------------------------------------------------------


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
        summary = (
            f"*Decision:* `{verdict.decision.value}` \u00b7 *confidence* {verdict.confidence:.2f}"
            f" ({verdict.level.value})"
        )
        if cost_usd is not None:
            summary += f" \u00b7 cost ${cost_usd:.4f}"
        blocks += sections(f"{summary}\n{escape(clip(verdict.synthesis, 600))}")
        blocks.append(context("Full verdict, rounds and review in the thread."))
    return Message(f"Debate #{debate_id}: {escape(clip(question, 200))}", blocks)


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
) -> list[Message]:
    """The verdict in the thread: synthesis, the protocol's own `outcome`, confidence and its
    method, open points, cost, and the start of the audit seal, so a copy of it lives outside
    the database."""
    v = result.verdict
    blocks: list[Block] = [header(f"Verdict of debate #{debate_id}")]
    blocks += sections(status_line(v.status.value, result.error or ""))
    blocks += sections(
        f"*Decision:* `{v.decision.value}`\n*Confidence:* {v.confidence:.2f} ({v.level.value})"
    )
    blocks += sections(f"*Synthesis*\n{escape(v.synthesis)}")
    blocks += outcome
    if v.confidence_method:
        steps = [f"{step.delta:+.2f} {step.reason}" for step in v.confidence_method]
        blocks += sections(f"*How the confidence was reached*\n{bullets(steps)}")
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
    pages = paginate(f"Verdict: {v.decision.value} ({v.confidence:.2f})", blocks)
    last = pages[-1]
    pages[-1] = Message(last.text, [*last.blocks, feedback_buttons(debate_id)])
    return pages


def feedback_buttons(debate_id: int) -> Block:
    """Slack's thumbs up and down under a verdict; each person's click is stored (once per
    person, a change of mind overwrites it) and counted per protocol."""

    def button(label: str, value: str, meaning: str) -> dict[str, Any]:
        return {
            "text": _plain(label),
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


# --- escalation ------------------------------------------------------------------------------


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
) -> Message:
    """The review request: who is asked, why, and the buttons (*Another round* only where the
    protocol can run one more round). Posted away from the debate's thread (a review channel),
    it carries the `question` and the verdict's `synthesis`, since the thread is not beside it."""
    who = " ".join(mention(person) for person in reviewers) or (
        "_No reviewers are configured for this channel; a workspace admin can decide, and"
        " `/debate config` sets reviewers._"
    )
    value = str(escalation_id)
    blocks: list[Block] = [
        *sections(
            f":rotating_light: *Review needed* for debate #{debate_id} (confidence"
            f" {confidence:.2f})\n{who}"
        ),
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
    return Message(f"Review needed for debate #{debate_id}", blocks)


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
) -> Message:
    """The review request after the decision: the buttons are gone, the decision is shown."""
    label = DECISION_LABEL.get(decision, decision)
    text = f"{label} by {mention(reviewer)} at {decided_at}"
    if note:
        text += f"\n>{fit(escape(note), 6_000)}"
    blocks = [
        *sections(f":rotating_light: *Review of debate #{debate_id}*"),
        *sections(f"*Why it was escalated*\n{fit(bullets(reasons), 2_500)}"),
        *sections(text),
    ]
    return Message(f"Debate #{debate_id}: {label}", blocks)


# --- help, modals and home ---------------------------------------------------------------------

HELP = """*`/debate QUESTION [options]`* runs a structured debate in a thread and posts a verdict.
Options:
\u2022 `--protocol NAME` debate protocol (available: {protocols})
\u2022 `--rounds N` at most N rounds (adversarial: 1 to 3)
\u2022 `--for "STANCE"` / `--against "STANCE"` debater stances (stances protocol)
\u2022 `--budget USD` cost ceiling for this debate, e.g. `--budget 0.50`
\u2022 `--route` let a fast model answer first (panel protocol)
\u2022 `--review-in #channel` post the review request there instead of in the thread
\u2022 `--adr URL` debate the ADR a GitHub or GitLab link points to (a file or a pull request)
Other forms:
\u2022 `/debate` alone opens a form
\u2022 `/debate config` opens this channel's settings; `/debate config show`;\
 `/debate config set threshold 0.7` (owners and admins)
\u2022 `/debate config set monthly_budget 50`, `review_sla 24`, `digest 09:00`,\
 `timezone Europe/Berlin`: spending cap, review expiry, daily digest (`off` turns one off)
\u2022 React with :{reaction}: on a message to debate its thread
\u2022 In channels watching ADRs, a new top-level ADR post starts a debate in its thread
\u2022 In the assistant (the debatebot icon at the top of Slack), paste a decision or an ADR"""

PROTOCOL_ADVICE = "\n".join(
    [
        "*Which protocol should I use?*",
        "\u2022 `adversarial` (the default): a proposal against a critic that must disagree,"
        " judged by a moderator. For a yes/no decision such as an ADR.",
        "\u2022 `stances`: debaters defend stances you name (`--for`, `--against`), one judge"
        " decides. For choosing between known options.",
        "\u2022 `consensus`: three debaters propose, critique and revise, then vote; code counts"
        " the vote. For a team that needs agreement, not a winner.",
        "\u2022 `structured`: numbered PRO and CON arguments, cross-examination, closings, a judge"
        " who scores every argument. For a decision someone must audit argument by argument.",
        "\u2022 `panel`: independent answers from several perspectives, peer critique, measured"
        " convergence. For open questions; add `--route` to let a fast model answer the easy"
        " ones.",
        "Add the protocol to your message, e.g. `--protocol structured`.",
    ]
)


def help_text(*, protocols: Sequence[str], reaction: str) -> str:
    return HELP.format(protocols=", ".join(protocols), reaction=reaction)


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _input(
    block_id: str, label: str, element: dict[str, Any], *, optional: bool = False, hint: str = ""
) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": _plain(label),
        "element": element,
        "optional": optional,
    }
    if hint:
        block["hint"] = _plain(hint)
    return block


def _text_input(
    action_id: str, *, initial: str = "", multiline: bool = False, max_length: int = 3000
) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": action_id,
        "multiline": multiline,
        "max_length": max_length,
    }
    if initial:
        element["initial_value"] = clip(initial, max_length)
    return element


def _select(action_id: str, options: Sequence[str], initial: str) -> dict[str, Any]:
    choices = [{"text": _plain(option), "value": option} for option in options]
    element: dict[str, Any] = {"type": "static_select", "action_id": action_id, "options": choices}
    if initial in options:
        element["initial_option"] = {"text": _plain(initial), "value": initial}
    return element


def _modal(
    callback_id: str, title: str, blocks: list[Block], metadata: str, submit: str
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "title": _plain(clip(title, MAX_MODAL_TITLE_CHARS)),
        "submit": _plain(submit),
        "close": _plain("Cancel"),
        "private_metadata": metadata,
        "blocks": blocks,
    }


def debate_modal(
    *, channel_id: str, protocols: Sequence[str], protocol: str, rounds: int
) -> dict[str, Any]:
    """The form `/debate` alone opens; its fields are the command's options."""
    blocks = [
        _input("question", "Question", _text_input("value", multiline=True, max_length=3000)),
        _input("protocol", "Protocol", _select("value", protocols, protocol)),
        _input("rounds", "Rounds", _text_input("value", initial=str(rounds), max_length=2)),
        _input(
            "stances_for",
            "Stances for",
            _text_input("value", multiline=True, max_length=1000),
            optional=True,
            hint="one per line; stances protocol only",
        ),
        _input(
            "stances_against",
            "Stances against",
            _text_input("value", multiline=True, max_length=1000),
            optional=True,
            hint="one per line; stances protocol only",
        ),
        _input("budget", "Budget (USD)", _text_input("value", max_length=10), optional=True),
        _input(
            "route",
            "Fast-model router",
            {
                "type": "checkboxes",
                "action_id": "value",
                "options": [
                    {
                        "text": _plain("Let a fast model answer first (panel protocol only)"),
                        "value": "on",
                    }
                ],
            },
            optional=True,
        ),
    ]
    return _modal(VIEW_DEBATE, "Start a debate", blocks, channel_id, "Debate")


def config_modal(*, settings: ChannelSettings, protocols: Sequence[str]) -> dict[str, Any]:
    """The channel settings form; people are given as mentions or ids, as in `config set`."""
    people = " ".join
    switches = [
        ({"text": _plain("Start a debate on new ADR posts"), "value": "on"}, settings.adr_watch),
        (
            {
                "text": _plain("Triage first: answer low-stakes ADRs and reactions directly"),
                "value": "triage",
            },
            settings.triage,
        ),
        (
            {"text": _plain("Panel: let a fast model answer first"), "value": "route"},
            settings.route,
        ),
        (
            {
                "text": _plain("Comment verdicts on linked pull requests"),
                "value": "pr_comment",
            },
            settings.pr_comment,
        ),
    ]
    adr: dict[str, Any] = {
        "type": "checkboxes",
        "action_id": "value",
        "options": [option for option, _ in switches],
    }
    if any(on for _, on in switches):
        adr["initial_options"] = [option for option, on in switches if on]
    blocks = [
        _input("protocol", "Protocol", _select("value", protocols, settings.protocol)),
        _input(
            "rounds", "Rounds", _text_input("value", initial=str(settings.rounds), max_length=2)
        ),
        _input(
            "threshold",
            "Escalation threshold",
            _text_input("value", initial=f"{settings.threshold:g}", max_length=6),
            hint="verdicts below this confidence (0 to 1) go to the reviewers",
        ),
        _input(
            "reviewers",
            "Reviewers",
            _text_input(
                "value", initial=people(mention(p) for p in settings.reviewers), max_length=2000
            ),
            optional=True,
            hint="@people or @user-group, or their ids (U…, S…)",
        ),
        _input(
            "owners",
            "Settings owners",
            _text_input(
                "value", initial=people(mention(p) for p in settings.owners), max_length=2000
            ),
            optional=True,
            hint="besides workspace admins, who may change these settings",
        ),
        _input(
            "budget",
            "Budget per debate (USD)",
            _text_input(
                "value",
                initial="" if settings.budget_usd is None else f"{settings.budget_usd:g}",
                max_length=10,
            ),
            optional=True,
        ),
        _input(
            "monthly_budget",
            "Monthly budget (USD)",
            _text_input("value", initial=_number(settings.monthly_budget_usd), max_length=12),
            optional=True,
            hint="this channel's spending cap per calendar month (UTC); empty: no cap",
        ),
        _input(
            "review_sla",
            "Review deadline (hours)",
            _text_input("value", initial=_number(settings.review_sla_h), max_length=6),
            optional=True,
            hint="an open review expires after this long; empty: the workspace default",
        ),
        _input(
            "digest",
            "Daily digest at",
            _text_input("value", initial=settings.digest_time or "", max_length=5),
            optional=True,
            hint="a local time like 09:00; empty: no digest",
        ),
        _input(
            "timezone",
            "Time zone",
            _text_input("value", initial=settings.timezone, max_length=64),
            optional=True,
            hint="an IANA name like Europe/Berlin, for the digest; empty: UTC",
        ),
        _input(
            "adr_pattern",
            "ADR title pattern",
            _text_input("value", initial=settings.adr_pattern or "", max_length=200),
            optional=True,
            hint="a regular expression for this channel's own ADR titles, like RFC-\\d+",
        ),
        _input("adr", "ADR watching, triage and comments", adr, optional=True),
        _input(
            "reaction",
            "Review reaction",
            _text_input("value", initial=settings.trigger_reaction, max_length=80),
        ),
    ]
    return _modal(VIEW_CONFIG, "Debate settings", blocks, settings.channel_id, "Save")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def review_note_modal(*, escalation_id: int, decision: str) -> dict[str, Any]:
    verb = "Approve" if decision == "approved" else "Reject"
    blocks = [
        _input(
            "note",
            "Note",
            _text_input("value", multiline=True, max_length=2000),
            optional=decision == "approved",
            hint="recorded with your decision in the audit trail",
        )
    ]
    return _modal(
        VIEW_REVIEW_NOTE, f"{verb} the verdict", blocks, f"{escalation_id}:{decision}", verb
    )


@dataclass(frozen=True)
class HomeDebate:
    debate_id: int
    channel_id: str | None
    question: str
    state: str
    outcome: str | None
    confidence: float | None
    positive: int = 0
    negative: int = 0


@dataclass(frozen=True)
class HomeStats:
    protocol: str
    debates: int
    positive: int
    negative: int


def home_view(
    *,
    pending: Sequence[HomeDebate],
    recent: Sequence[HomeDebate],
    spend_mine: float,
    spend_all: float,
    month: str,
    stats: Sequence[HomeStats] = (),
) -> dict[str, Any]:
    """App Home: reviews waiting for this user, recent debates in their channels with their
    feedback, spend, and how each protocol's verdicts were received."""
    blocks: list[Block] = [header("Reviews waiting for you")]
    blocks += [_home_line(item) for item in pending[:20]] or sections("_Nothing waiting._")
    blocks += [divider(), header("Recent debates in your channels")]
    blocks += [_home_line(item) for item in recent[:20]] or sections("_No debates yet._")
    blocks += [
        divider(),
        header(f"Spend in {month}"),
        *sections(f"Debates you started: *${spend_mine:.4f}*\nWhole workspace: *${spend_all:.4f}*"),
    ]
    if stats:
        lines = [
            f"`{s.protocol}` \u00b7 {s.debates} debate(s) \u00b7 :+1: {s.positive}"
            f" \u00b7 :-1: {s.negative}"
            for s in stats
        ]
        blocks += [divider(), header("Verdict feedback by protocol"), *sections("\n".join(lines))]
    return {"type": "home", "blocks": blocks[:MAX_VIEW_BLOCKS]}


def _home_line(item: HomeDebate) -> Block:
    where = f" in <#{item.channel_id}>" if item.channel_id else ""
    state = item.state
    if item.outcome:
        state = f"{item.outcome}, confidence {item.confidence or 0:.2f}"
    if item.positive or item.negative:
        state += f" \u00b7 :+1: {item.positive} :-1: {item.negative}"
    text = f"*#{item.debate_id}*{where} \u2014 {escape(clip(item.question, 300))}\n_{state}_"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
