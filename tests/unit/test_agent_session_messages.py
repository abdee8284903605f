"""What a debate owes its Slack agent session and its Stop button (issue 44), as values."""

from __future__ import annotations

from bot.messages import posts
from bot.messages.sessions import (
    MAX_TITLE_CHARS,
    SESSION_STATUS,
    SessionStatus,
    SessionUpdate,
    session,
)
from engine.models import DebateSpec, ModelSettings

SPEC = DebateSpec(
    question="Adopt <!here> " + "x" * 400,
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


def test_the_statuses_are_exactly_slacks_four() -> None:
    assert {s.value for s in SessionStatus} == {"processing", "active", "suspended", "closed"}


def test_a_session_draft_round_trips_through_its_row_escaped_and_within_200() -> None:
    draft = session(12, SPEC, SessionStatus.PROCESSING, "critic <is> speaking")
    assert (draft.key, draft.text) == (SESSION_STATUS, "processing")
    update = SessionUpdate.of_row(draft.text, draft.blocks)
    assert update.status is SessionStatus.PROCESSING
    assert update.title.startswith("Debate #12: Adopt &lt;!here&gt;")
    assert len(update.title) <= MAX_TITLE_CHARS
    assert update.line == "critic &lt;is&gt; speaking"


def stop_blocks(blocks: list[dict[str, object]]) -> list[object]:
    return [b for b in blocks if b.get("type") == "actions" and b.get("block_id") == "stop:3"]


def test_the_parent_carries_stop_until_the_debate_ends() -> None:
    def parent(status: str) -> list[dict[str, object]]:
        message = posts.parent_message(
            debate_id=3,
            question="Q?",
            requested_by="UALICE",
            protocol="adversarial",
            max_rounds=2,
            status=status,
        )
        return message.blocks

    for live in ("queued", "running", "moderating"):
        assert stop_blocks(parent(live)), live
    for ended in ("complete", "failed", "cancelled", "truncated_budget"):
        assert not stop_blocks(parent(ended)), ended


def test_the_stopped_line_keeps_who_as_a_mention_and_escapes_the_rest() -> None:
    line = posts.stopped_line(5, "stopped by <@UALICE> with Slack's Stop button <!channel>")
    text = str(line["elements"])
    assert "was stopped by <@UALICE> with Slack's Stop button &lt;!channel&gt;" in text
