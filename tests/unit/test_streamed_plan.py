"""A turn being written, as the live plan shows it: its task shows the prose written so far
(never JSON, never unescaped), a reply that failed validation is shown as re-asked, and the
notifier owes the plan for it at once, then at most every half second per turn."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from pydantic import BaseModel

from bot.messages import kit
from bot.messages.plan import PARTS, REASKED, WRITING, Plan, TaskStatus, task_id
from engine.events import TurnStarted, TurnStreaming
from engine.llm import output_schema
from engine.models import CriticTurn, DebateSpec, ModeratorTurn, ProposerTurn, Role
from engine.providers.fake import CANNED_DEBATE_REPLIES
from engine.streaming import readable_so_far
from tests.unit.test_fake_model import spec_for

# Hypothesis keeps caches under its home directory (`.hypothesis` in the working directory by
# default); the tree must hold nothing a test run wrote (test_self_contained).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "debatebot-hypothesis")

HOSTILE = 'The "fix" costs <!channel> & <https://x|y> \\ 5\u00a0\u20ac \U0001f389 {not json}'
TURNS: list[tuple[Role, type[BaseModel], dict[str, Any]]] = [
    (Role.PROPOSER, ProposerTurn, CANNED_DEBATE_REPLIES["ProposerTurn"]),
    (Role.CRITIC, CriticTurn, CANNED_DEBATE_REPLIES["CriticTurn"]),
    (Role.MODERATOR, ModeratorTurn, CANNED_DEBATE_REPLIES["ModeratorTurn"]),
    (
        Role.CRITIC,
        CriticTurn,
        {**CANNED_DEBATE_REPLIES["CriticTurn"], "thesis": HOSTILE, "counter_arguments": [HOSTILE]},
    ),
]
ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")


def strings(value: Any) -> list[str]:
    """Every text in a reply as a reader gets it (the oracle: JSON decoded by the standard
    library, not by the code under test)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for member in value.values() for text in strings(member)]
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


def streamed(role: Role, text: str = "", *, reasked: bool = False) -> TurnStreaming:
    return TurnStreaming(round=1, role=role, attempt=1, text=text, reasked=reasked)


def plan_at_turn(role: Role) -> Plan:
    plan = Plan(debate_id=3, spec=spec_for("adversarial"))
    plan.started(TurnStarted(round=1, role=role, attempt=1, provider="fake", model="fake-model"))
    return plan


def task_output(plan: Plan, role: Role) -> dict[str, Any]:
    ident = task_id((1, role, "", "", 1))
    [chunk] = [c for c in plan.live().chunks if c.get("id") == ident]
    return chunk


@settings(
    max_examples=400,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    which=st.integers(min_value=0, max_value=len(TURNS) - 1),
    cut=st.floats(min_value=0.0, max_value=1.0),
    ascii_only=st.booleans(),
    fenced=st.booleans(),
)
def test_no_cut_of_a_real_turn_puts_json_or_unescaped_text_in_the_plan(
    which: int, cut: float, ascii_only: bool, fenced: bool
) -> None:
    role, kind, reply = TURNS[which]
    raw = json.dumps(reply, ensure_ascii=ascii_only)
    raw = f"```json\n{raw}\n```" if fenced else raw
    schema = output_schema(kind)
    lines = [" ".join(line.split()) for text in strings(reply) for line in text.splitlines()]
    partial = readable_so_far(raw[: int(len(raw) * cut)], schema)

    plan = plan_at_turn(role)
    changed = plan.streaming(streamed(role, partial))
    chunk = task_output(plan, role)

    assert chunk["status"] == TaskStatus.IN_PROGRESS.value
    output = chunk.get("output", "")
    assert changed == bool(partial.strip())
    if not partial.strip():
        return
    assert output.startswith(WRITING)
    assert "<" not in output
    assert ">" not in output
    assert not ENTITY.search(output), output
    output.encode("utf-8")  # no half of a surrogate pair
    shown = kit.unescape(output.removeprefix(WRITING)).strip("\u2026")
    # Each line shown is (part of) a line of the finished turn's text as a reader gets it: no
    # key, quote, brace or escape of the JSON it was cut from.
    for piece in shown.split(PARTS):
        assert any(piece.strip() in line for line in lines), (piece, lines)


def test_a_long_text_shows_its_end() -> None:
    plan = plan_at_turn(Role.CRITIC)
    plan.streaming(streamed(Role.CRITIC, "word " * 100 + "latest"))
    output = task_output(plan, Role.CRITIC)["output"]
    assert output.startswith(WRITING + "\u2026")
    assert output.endswith("word latest")
    assert len(output) <= 256


def test_a_reasked_reply_is_shown_as_reasked_and_the_new_text_replaces_it() -> None:
    plan = plan_at_turn(Role.CRITIC)
    plan.streaming(streamed(Role.CRITIC, "The proposal fails"))
    assert plan.streaming(streamed(Role.CRITIC, reasked=True))
    assert task_output(plan, Role.CRITIC)["output"] == REASKED
    plan.streaming(streamed(Role.CRITIC, "Second try"))
    assert task_output(plan, Role.CRITIC)["output"] == f"re-asked 1 time{PARTS}{WRITING}Second try"


def test_text_arriving_after_the_turn_finished_changes_nothing() -> None:
    spec: DebateSpec = spec_for("adversarial")
    plan = Plan(debate_id=3, spec=spec)
    plan.started(
        TurnStarted(round=1, role=Role.CRITIC, attempt=1, provider="fake", model="fake-model")
    )
    plan.tasks[task_id((1, Role.CRITIC, "", "", 1))].status = TaskStatus.COMPLETE
    assert not plan.streaming(streamed(Role.CRITIC, "late"))
