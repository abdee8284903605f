"""The shape every Slack request must have before a listener sees it.

A correctly signed request can still be malformed (a proxy that mangles it, a replayed test
payload, an attacker holding the signing secret). Each check here names what is missing, so
the request gets a 400 with that reason instead of a listener crashing halfway (which, for an
event, would also have marked it handled, so Slack's retry would be ignored).
"""

from __future__ import annotations

import re
from typing import Any

from bot.messages import action_ids
from bot.store.review_tables import EscalationState
from engine.models import replace_surrogates

REVIEW_ACTIONS = (
    action_ids.ACTION_APPROVE,
    action_ids.ACTION_REJECT,
    action_ids.ACTION_ANOTHER_ROUND,
)
NOTE_DECISIONS = (EscalationState.APPROVED.value, EscalationState.REJECTED.value)
FEEDBACK_VALUE = re.compile(r"^(?:positive|negative):[0-9]{1,12}$")
SLACK_ID = re.compile(r"^[A-Z0-9][A-Z0-9_-]{1,40}$")
NUMBER = re.compile(r"^[0-9]{1,12}$")
"""A button's id value: ASCII digits only (`str.isdigit` takes "²", which `int` refuses)."""
WEIGHTS_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
"""A confidence weights version, as the Adopt button carries it (at most the column's 40)."""
_CHANNEL_BUTTONS: dict[str, tuple[re.Pattern[str], str, str]] = {
    **{review: (NUMBER, "review", "a review request id") for review in REVIEW_ACTIONS},
    action_ids.ACTION_FEEDBACK: (FEEDBACK_VALUE, "feedback", "positive:ID or negative:ID"),
    action_ids.ACTION_DEBATE_ANYWAY: (NUMBER, "Debate anyway", "a debate id"),
}
"""Buttons on a message in a channel, by action id: the pattern their value must match, the
button's name and what its value is, for the reason a malformed click is refused."""
MAX_DEPTH = 48
"""Slack's deepest payloads (a view's state, rich text in a message) nest about a dozen levels."""


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _id(value: Any) -> bool:
    return isinstance(value, str) and bool(SLACK_ID.match(value))


def _get(body: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(body, dict):
            return None
        body = body.get(key)
    return body


def depth(body: Any) -> int:
    """How deeply `body`'s lists and objects nest, counted without recursion (a hostile body may
    nest deeper than Python's recursion limit); it stops counting past MAX_DEPTH."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, dict | list):
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children)
    return deepest


def scrub(body: Any) -> int:
    """Replace, in place, every lone surrogate in `body`'s strings (keys too) with U+FFFD, the
    replacement character; returns how many strings changed. JSON's `"\\ud800"` decodes to one,
    and no database, log file or Slack call can encode it as UTF-8."""
    changed = 0
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                value = node[key]
                clean_key = replace_surrogates(key) if isinstance(key, str) else key
                if isinstance(value, str) and (clean := replace_surrogates(value)) != value:
                    node[key], changed = clean, changed + 1
                if clean_key != key:
                    node[clean_key] = node.pop(key)
                    changed += 1
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, str) and (clean := replace_surrogates(value)) != value:
                    node[index], changed = clean, changed + 1
                stack.append(value)
    return changed


def problem(body: Any) -> str | None:
    """What is wrong with the shape of a parsed Slack request body, or None."""
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if depth(body) > MAX_DEPTH:
        return f"the payload nests deeper than {MAX_DEPTH} levels, which Slack never does"
    kind = body.get("type")
    if body.get("command") is not None:
        return _command(body)
    if kind == "event_callback":
        return _event(body.get("event"))
    if kind == "block_actions":
        return _actions(body)
    if kind == "view_submission":
        return _view(body)
    if kind in ("message_action", "shortcut"):
        return _shortcut(body)
    return None


def _command(body: dict[str, Any]) -> str | None:
    for field in ("channel_id", "user_id", "trigger_id"):
        if not _text(body.get(field)):
            return f"the command has no {field}"
    return None


def _event(event: Any) -> str | None:
    if not isinstance(event, dict) or not _text(event.get("type")):
        return "the event callback carries no event"
    located = _id(event.get("channel")) and _text(event.get("ts"))
    if event["type"] == "message" and not event.get("subtype") and not located:
        return "the message event has no channel or ts"
    if event["type"] == "reaction_added":
        item = event.get("item")
        if not isinstance(item, dict) or not (_id(item.get("channel")) and _text(item.get("ts"))):
            return "the reaction event's item has no channel or ts"
        if not (_id(event.get("user")) and _text(event.get("reaction"))):
            return "the reaction event has no user or reaction"
    if event["type"] == "app_home_opened" and not _id(event.get("user")):
        return "the App Home event has no user"
    if event["type"] == "assistant_thread_started":
        thread = event.get("assistant_thread")
        if not isinstance(thread, dict) or not (
            _id(thread.get("channel_id")) and _text(thread.get("thread_ts"))
        ):
            return "the assistant thread event has no channel or thread"
    in_assistant = event["type"] == "message" and event.get("channel_type") == "im"
    from_person = not event.get("bot_id") and not event.get("subtype")
    if in_assistant and event.get("thread_ts") and from_person and not _id(event.get("user")):
        return "the assistant message has no user"
    return None


def _actions(body: dict[str, Any]) -> str | None:
    if not _id(_get(body, "user", "id")):
        return "the action has no user"
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return "the action list is empty"
    action = actions[0]
    button = _CHANNEL_BUTTONS.get(str(action.get("action_id")))
    if button is not None:
        value, name, meaning = button
        if not value.match(str(action.get("value", ""))):
            return f"the {name} button's value is not {meaning}"
        if not _id(_get(body, "channel", "id")):
            return f"the {name} button was not clicked in a channel"
    if action.get("action_id") == action_ids.ACTION_ADOPT_WEIGHTS and not WEIGHTS_VERSION.match(
        str(action.get("value", ""))
    ):
        return "the Adopt button's value is not a confidence weights version"
    return None


def _view(body: dict[str, Any]) -> str | None:
    if not _id(_get(body, "user", "id")):
        return "the form was submitted by no user"
    view = body.get("view")
    if not isinstance(view, dict) or not isinstance(_get(view, "state", "values"), dict):
        return "the form has no state"
    if not _text(view.get("type")):
        return "the form has no type"
    metadata = view.get("private_metadata")
    callback = view.get("callback_id")
    if callback == action_ids.VIEW_REVIEW_NOTE:
        raw_id, _, decision = str(metadata or "").partition(":")
        if not NUMBER.match(raw_id) or decision not in NOTE_DECISIONS:
            return "the review form's metadata names no review request and decision"
    elif callback in (action_ids.VIEW_DEBATE, action_ids.VIEW_CONFIG) and not _id(metadata):
        return "the form's metadata names no channel"
    if callback == action_ids.VIEW_DEBATE and not _text(view.get("id")):
        return "the form has no id"
    return None


def _shortcut(body: dict[str, Any]) -> str | None:
    if not (_id(_get(body, "channel", "id")) and _text(_get(body, "message", "ts"))):
        return "the shortcut names no message"
    if not _id(_get(body, "user", "id")):
        return "the shortcut has no user"
    return None
