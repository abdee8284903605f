"""What the debates this process runs are writing now: each running turn's readable text (the
engine's `TurnStreaming`), for a front door in the same process to show before the turn is
stored (`debatebot web`'s event stream). Held in memory only, since a turn's text as it is
written is never stored: a door in another process shows the turns as they are stored."""

from __future__ import annotations

from bot.store.debate_tables import Debate
from engine.events import (
    DebateCancelled,
    DebateEvent,
    DebateFailed,
    DebateTruncated,
    EventSink,
    TurnFinished,
    TurnStreaming,
    VerdictReached,
)
from engine.protocols.definition import TurnKey

ENDINGS = (VerdictReached, DebateTruncated, DebateFailed, DebateCancelled)


class WritingBoard:
    """The turns being written, by debate; each change of a debate's bumps its version."""

    def __init__(self) -> None:
        self._writing: dict[int, dict[TurnKey, TurnStreaming]] = {}
        self._versions: dict[int, int] = {}

    def version(self, debate_id: int) -> int:
        return self._versions.get(debate_id, 0)

    def writing(self, debate_id: int) -> list[TurnStreaming]:
        """The debate's turns being written now, in the order they began."""
        return list(self._writing.get(debate_id, {}).values())

    def sink_for(self, debate: Debate) -> EventSink:
        """The event sink that keeps `debate`'s turns being written: a turn's newest text
        until it finishes, nothing once the debate has ended."""
        assert debate.id is not None
        debate_id = debate.id

        async def sink(event: DebateEvent) -> None:
            if isinstance(event, ENDINGS):
                # Forgotten whole (a follower sees its version change, to nothing written).
                self._writing.pop(debate_id, None)
                self._versions.pop(debate_id, None)
                return
            now = self._writing.setdefault(debate_id, {})
            if isinstance(event, TurnStreaming):
                now[event.key] = event
            elif isinstance(event, TurnFinished) and event.turn.key in now:
                del now[event.turn.key]
            else:
                return
            self._versions[debate_id] = self.version(debate_id) + 1

        return sink
