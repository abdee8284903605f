"""Slack's agent sessions, as the emulator plays them (docs.slack.dev/ai/agent-sessions and the
reference pages of `agents.sessions.setStatus`, `agents.sessions.rename` and the
`agent_session_stopped` event).

- A session is scoped to one thread (channel, thread_ts). `setStatus` "creates the session if
  it doesn't exist and updates its status if it does"; its `title` ("max 200 characters") is
  "only used when creating a new session; ignored if the session already exists".
- The status is one of "active processing suspended closed"; any other is refused with
  `invalid_arguments`.
- "Only apps declared as agents in the app settings can create sessions": with
  `declared=False` every call answers `not_authorized`. With `available=False` the methods do
  not exist (`unknown_method`), as on a Slack without them.
- "While your app is not subscribed [to agent_session_stopped], agents.sessions.setStatus
  returns a missing_agent_session_stopped_event_subscription warning": the subscription is read
  from the manifest the app was made from (`bot_events`, by default slack/manifest.yml's).
- `rename` takes a new title of 1-200 characters, for a session that exists.
- Stop is shown only while a session is `processing`, and only to an app subscribed to the
  event ("the user sees a non-interactive loading indicator instead"): `press_stop` refuses to
  press a button Slack would not show. Pressing it stops the app's streams in the thread and
  yields the event (channel, thread_ts, user, `streaming_message_ts`: "the timestamps of your
  app's in-progress streaming messages that Slack stopped"; empty when none). "The session
  status does not update automatically": the app must move it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "slack" / "manifest.yml"
STATUSES = frozenset({"active", "processing", "suspended", "closed"})
"""`status`: "Acceptable values: active processing suspended closed"."""
MAX_TITLE = 200
STOP_EVENT = "agent_session_stopped"
NOT_SUBSCRIBED = "missing_agent_session_stopped_event_subscription"


def manifest_events(path: Path = MANIFEST) -> set[str]:
    """The bot events the app's manifest subscribes to."""
    manifest = yaml.safe_load(path.read_text())
    return set(manifest["settings"]["event_subscriptions"]["bot_events"])


@dataclass
class Session:
    channel: str
    thread_ts: str
    title: str
    status: str
    statuses: list[str] = field(default_factory=list)
    """Every status it was set to, in order."""


@dataclass
class AgentSessions:
    sessions: dict[tuple[str, str], Session] = field(default_factory=dict)
    declared: bool = True
    """False: the app is not declared an agent (`not_authorized`)."""
    available: bool = True
    """False: a Slack without agent sessions (`unknown_method`)."""
    bot_events: set[str] = field(default_factory=manifest_events)

    def refusal(self) -> dict[str, Any] | None:
        if not self.available:
            return {"ok": False, "error": "unknown_method"}
        if not self.declared:
            return {"ok": False, "error": "not_authorized"}
        return None

    def set_status(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self.refusal()
        if refused:
            return refused
        status, title = params.get("status"), params.get("title")
        if status not in STATUSES:
            return {"ok": False, "error": "invalid_arguments"}
        if title is not None and not 0 < len(str(title)) <= MAX_TITLE:
            return {"ok": False, "error": "invalid_arguments"}
        key = (str(params.get("channel_id")), str(params.get("thread_ts") or ""))
        session = self.sessions.get(key)
        if session is None:
            session = Session(key[0], key[1], str(title or ""), str(status))
            self.sessions[key] = session
        session.status = str(status)
        session.statuses.append(session.status)
        answer: dict[str, Any] = {"ok": True, "status": session.status, "title": session.title}
        if STOP_EVENT not in self.bot_events:
            answer["warning"] = NOT_SUBSCRIBED
        return answer

    def rename(self, params: dict[str, Any]) -> dict[str, Any]:
        refused = self.refusal()
        if refused:
            return refused
        title = str(params.get("title") or "")
        key = (str(params.get("channel_id")), str(params.get("thread_ts") or ""))
        session = self.sessions.get(key)
        # The reference names no error of its own for these; Slack's general refusal of
        # arguments it cannot use is `invalid_arguments`.
        if session is None or not 0 < len(title) <= MAX_TITLE:
            return {"ok": False, "error": "invalid_arguments"}
        session.title = title
        return {"ok": True, "title": title}

    def stop_event(
        self, channel: str, thread_ts: str, user: str, stopped: list[str]
    ) -> dict[str, Any]:
        """The event a press of Stop sends; refuses a press Slack would not allow."""
        session = self.sessions.get((channel, thread_ts))
        assert session is not None, f"no agent session in {channel}/{thread_ts}"
        assert session.status == "processing", f"no Stop shown: the session is {session.status}"
        assert STOP_EVENT in self.bot_events, "no Stop shown: the app is not subscribed"
        return {
            "type": STOP_EVENT,
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": stopped,
            "event_ts": thread_ts,
        }
