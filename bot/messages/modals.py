"""The forms: start a debate, change a channel's settings, add a note to a review."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.messages.action_ids import VIEW_CONFIG, VIEW_DEBATE, VIEW_REVIEW_NOTE
from bot.messages.kit import MAX_MODAL_TITLE_CHARS, Block, clip, mention, plain
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from bot.store.review_tables import EscalationState


def _input(
    block_id: str, label: str, element: dict[str, Any], *, optional: bool = False, hint: str = ""
) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": plain(label),
        "element": element,
        "optional": optional,
    }
    if hint:
        block["hint"] = plain(hint)
    return block


def _text_input(
    action_id: str,
    *,
    initial: str = "",
    multiline: bool = False,
    max_length: int = 3000,
    placeholder: str = "",
) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": action_id,
        "multiline": multiline,
        "max_length": max_length,
    }
    if initial:
        element["initial_value"] = clip(initial, max_length)
    if placeholder:
        # Block Kit caps a placeholder at 150 characters.
        element["placeholder"] = plain(clip(placeholder, 150))
    return element


def _select(action_id: str, options: Sequence[str], initial: str) -> dict[str, Any]:
    choices = [{"text": plain(option), "value": option} for option in options]
    element: dict[str, Any] = {"type": "static_select", "action_id": action_id, "options": choices}
    if initial in options:
        element["initial_option"] = {"text": plain(initial), "value": initial}
    return element


def _modal(
    callback_id: str, title: str, blocks: list[Block], metadata: str, submit: str
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "title": plain(clip(title, MAX_MODAL_TITLE_CHARS)),
        "submit": plain(submit),
        "close": plain("Cancel"),
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
        *(
            _input(
                f"stances_{side}",
                f"Stances {side}",
                _text_input("value", multiline=True, max_length=1000),
                optional=True,
                hint="one per line; stances protocol only",
            )
            for side in ("for", "against")
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
                        "text": plain("Let a fast model answer first (panel protocol only)"),
                        "value": "on",
                    }
                ],
            },
            optional=True,
        ),
    ]
    return _modal(VIEW_DEBATE, "Start a debate", blocks, channel_id, "Debate")


def config_modal(
    *, settings: ChannelSettings, defaults: ChannelDefaults, protocols: Sequence[str]
) -> dict[str, Any]:
    """The channel settings form; people are given as mentions or ids, as in `config set`."""
    people = " ".join
    switches = [
        ({"text": plain("Start a debate on new ADR posts"), "value": "on"}, settings.adr_watch),
        (
            {
                "text": plain("Triage first: answer low-stakes ADRs and reactions directly"),
                "value": "triage",
            },
            settings.triage,
        ),
        (
            {"text": plain("Panel: let a fast model answer first"), "value": "route"},
            settings.route,
        ),
        (
            {
                "text": plain("Comment verdicts on linked pull requests"),
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
        _setting(
            "rounds",
            "Rounds",
            "" if settings.rounds is None else str(settings.rounds),
            max_length=2,
            placeholder=f"deployment default: {defaults.rounds}",
            hint="empty: the deployment's default",
        ),
        _setting(
            "threshold",
            "Escalation threshold",
            _number(settings.threshold),
            max_length=6,
            placeholder=f"deployment default: {defaults.threshold:g}",
            hint="verdicts below this confidence (0 to 1) go to the reviewers; empty: the"
            " deployment's default",
        ),
        _setting(
            "reviewers",
            "Reviewers",
            people(mention(p) for p in settings.reviewers),
            max_length=2000,
            hint="@people or @user-group, or their ids (U…, S…)",
        ),
        _setting(
            "owners",
            "Settings owners",
            people(mention(p) for p in settings.owners),
            max_length=2000,
            hint="besides workspace admins, who may change these settings",
        ),
        _setting("budget", "Budget per debate (USD)", _number(settings.budget_usd), max_length=10),
        _setting(
            "monthly_budget",
            "Monthly budget (USD)",
            _number(settings.monthly_budget_usd),
            max_length=12,
            hint="this channel's spending cap per calendar month (UTC); empty: no cap",
        ),
        _setting(
            "review_sla",
            "Review deadline (hours)",
            _number(settings.review_sla_h),
            max_length=6,
            hint="an open review expires after this long; empty: the workspace default",
        ),
        _setting(
            "digest",
            "Daily digest at",
            settings.digest_time or "",
            max_length=5,
            hint="a local time like 09:00; empty: no digest",
        ),
        _setting(
            "timezone",
            "Time zone",
            settings.timezone,
            max_length=64,
            hint="an IANA name like Europe/Berlin, for the digest; empty: UTC",
        ),
        _setting(
            "adr_pattern",
            "ADR title pattern",
            settings.adr_pattern or "",
            max_length=200,
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


def _setting(
    block_id: str,
    label: str,
    initial: str,
    *,
    max_length: int,
    placeholder: str = "",
    hint: str = "",
) -> Block:
    """One optional one-line channel setting of the settings form, shown with its current value;
    left empty, it stands for the default the hint names."""
    element = _text_input("value", initial=initial, max_length=max_length, placeholder=placeholder)
    return _input(block_id, label, element, optional=True, hint=hint)


def review_note_modal(*, escalation_id: int, decision: str) -> dict[str, Any]:
    verb = "Approve" if decision == EscalationState.APPROVED else "Reject"
    blocks = [
        _input(
            "note",
            "Note",
            _text_input("value", multiline=True, max_length=2000),
            optional=decision == EscalationState.APPROVED,
            hint="recorded with your decision in the audit trail",
        )
    ]
    return _modal(
        VIEW_REVIEW_NOTE, f"{verb} the verdict", blocks, f"{escalation_id}:{decision}", verb
    )
