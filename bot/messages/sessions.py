"""A debate's Slack agent session (issue 44): the thread it runs in, shown by Slack as a session
with a status, a title and, while `processing`, Slack's own Stop button.

Slack's `agents.sessions.setStatus` takes exactly four statuses ("Acceptable values: active
processing suspended closed"; any other is refused with `invalid_arguments`), so the status is
an enum and nothing else is ever sent. It creates the session on first use, with a title
("max 200 characters", used only on creation). The session's status travels as one outbox
update per debate (`SESSION_STATUS`), coalesced like the parent's live status: `processing`
from the debate's first turn, `ENDED` at its end. The same row carries the "who is speaking"
line, which a workspace without agent sessions gets through `assistant.threads.setStatus`
instead (bot.jobs.delivery.sessions).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.messages import kit
from bot.store.outbox import PARENT, Draft
from bot.store.outbox_tables import OutboxAction
from engine.models import DebateSpec


class SessionStatus(StrEnum):
    """The statuses `agents.sessions.setStatus` accepts, and no other."""

    PROCESSING = "processing"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


SESSION_STATUS = "status:session"
"""The outbox key of a debate's session status (an update of the parent's thread)."""
ENDED = SessionStatus.ACTIVE
"""The status a debate's session is left in when the debate ends, however it ends (done,
failed, stopped). `active`, not `closed`: the thread goes on after the verdict (a reviewer's
Another round, a follow-up question in the thread start a new debate in the same thread, that
is the same session), and nothing in Slack's reference says a closed session may be set
`processing` again, so the bot never closes one it may need to reopen."""
MAX_TITLE_CHARS = 200
"""`title`: "max 200 characters"."""
SESSION_PART = "agent_session"
"""The type of the one entry of the row's blocks that holds the title and the status line."""


@dataclass(frozen=True)
class SessionUpdate:
    """What a debate's session is sent: its status, its title (used when Slack creates the
    session) and the "who is speaking" line (for the assistant status where sessions are not
    available; "" clears it)."""

    status: SessionStatus
    title: str
    line: str = ""

    def draft(self) -> Draft:
        part: dict[str, Any] = {"type": SESSION_PART, "title": self.title, "line": self.line}
        return Draft(
            key=SESSION_STATUS,
            text=self.status.value,
            blocks=[part],
            action=OutboxAction.UPDATE,
            target_key=PARENT,
        )

    @classmethod
    def of_row(cls, text: str, blocks: list[dict[str, Any]]) -> SessionUpdate:
        """The update a stored row holds (written by `draft`)."""
        part = next((b for b in blocks if b.get("type") == SESSION_PART), {})
        return cls(
            status=SessionStatus(text),
            title=str(part.get("title", "")),
            line=str(part.get("line", "")),
        )


def title(debate_id: int, spec: DebateSpec) -> str:
    """The session's title: the debate's number and its question, escaped like every text the
    bot sends (as the assistant thread's title is), within Slack's 200."""
    return kit.fit(kit.escape(f"Debate #{debate_id}: {spec.question}"), MAX_TITLE_CHARS)


def session(debate_id: int, spec: DebateSpec, status: SessionStatus, line: str = "") -> Draft:
    """The session status owed for debate `debate_id` (the line escaped like every text the bot
    sends)."""
    return SessionUpdate(status, title(debate_id, spec), kit.escape(line)).draft()
