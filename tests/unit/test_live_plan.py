"""The live plan as values: the tasks a run's events give are the tasks its stored record gives
(so a resumed run continues the plan it streamed), statuses only move forward, every chunk is
one slack_sdk's `Chunk` models take as it is and within Slack's limits, every text in it is
escaped once, and what a newer version sends is only what changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk.models.messages.chunk import Chunk

from bot.messages import kit
from bot.messages.plan import (
    MAX_PLAN_TITLE_CHARS,
    MAX_TASK_TEXT_CHARS,
    Plan,
    StreamContent,
    TaskStatus,
    as_message,
    closing_chunks,
    delta,
    merged,
)
from engine.events import DebateEvent, TurnFinished, TurnStarted
from engine.models import DebateResult, DebateSpec, DebateStatus, Participant, Role
from engine.providers.fake import SchemaFillingLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts
from tests.unit.test_block_kit import valid
from tests.unit.test_fake_model import FAKE, SPECS, spec_for

HOSTILE = "<!channel> *bold* <https://x|y>"
RANK = {"pending": 0, "in_progress": 1, "complete": 2, "error": 2}
STATUSES = {status.value for status in TaskStatus}


async def followed(spec: DebateSpec, seed: int = 3) -> tuple[DebateResult, Plan, list[Any]]:
    """Run `spec` on the schema-filling fake, folding its events into a plan as the notifier
    does; the result, the plan, and every version it would owe."""
    plan = Plan(debate_id=7, spec=spec)
    versions: list[list[dict[str, Any]]] = []

    async def sink(event: DebateEvent) -> None:
        changed = False
        if isinstance(event, TurnStarted):
            changed = plan.started(event)
        elif isinstance(event, TurnFinished):
            changed = plan.finished(event.turn)
        if changed:
            versions.append(plan.live().chunks)

    model = SchemaFillingLLM(seed=seed)
    result = await run_debate(
        spec, resolve_llm=lambda _: model, prompts=shipped_prompts(), sink=sink
    )
    return result, plan, versions


def sdk_valid(chunks: list[dict[str, Any]]) -> None:
    """Each chunk is one slack_sdk knows, holding nothing it would not send, within limits."""
    for raw in chunks:
        parsed = Chunk.parse(raw)
        assert parsed is not None, raw
        assert parsed.to_dict() == raw
        if raw["type"] == "task_update":
            assert raw["status"] in STATUSES
            assert len(raw["title"]) <= MAX_TASK_TEXT_CHARS
            assert len(raw.get("output", "")) <= MAX_TASK_TEXT_CHARS
        if raw["type"] == "plan_update":
            assert len(raw["title"]) <= MAX_PLAN_TITLE_CHARS


@pytest.mark.parametrize("name", list(SPECS))
async def test_the_live_plan_is_the_plan_the_record_gives(name: str) -> None:
    result, live, versions = await followed(spec_for(name))
    assert result.status is DebateStatus.COMPLETE, result.error
    recorded = Plan.of_result(7, result)

    final = recorded.closed(result)
    assert [c["id"] for c in final.chunks[1:]] == [*live.tasks, "checks"]
    assert all(c["status"] == "complete" and c["output"] for c in final.chunks[1:])
    turns = [t for t in result.transcript if t.role is not Role.TRIAGE]
    assert len(live.tasks) == len(turns)
    # The stop sends what changed and nothing the plan does not hold.
    sent = merged([], versions[-1])
    assert {c.get("id") for c in closing_chunks(sent, final)} <= {None, *live.tasks, "checks"}
    for version in [*versions, final.chunks]:
        sdk_valid(version)


@pytest.mark.parametrize("name", list(SPECS))
async def test_a_task_never_goes_back(name: str) -> None:
    _result, _plan, versions = await followed(spec_for(name), seed=1)
    seen: dict[str, list[str]] = {}
    for version in versions:
        for chunk in version[1:]:
            seen.setdefault(chunk["id"], []).append(chunk["status"])
    for path in seen.values():
        assert [RANK[s] for s in path] == sorted(RANK[s] for s in path), path
        assert path[-1] == "complete"
    assert any("in_progress" in path for path in seen.values())
    assert any(path[0] == "pending" for path in seen.values()), "a round's tasks are announced"


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("judges", [1, 2])
async def test_the_independent_judges_step_names_the_judge_and_its_decision(
    name: str, judges: int
) -> None:
    """Every protocol's independent judges read as such: live, and once the verdict is out
    with the decision as the debate states it, whether it agrees, and the confidence."""
    spec = spec_for(name).model_copy(update={"judges": judges})
    result, _live, versions = await followed(spec)
    assert result.status is DebateStatus.COMPLETE, result.error
    assert [c.judge for c in result.judgments] == [f"judge-{n}" for n in range(1, judges + 1)]
    final = Plan.of_result(7, result).closed(result)

    labels = (
        ["Independent judge"] if judges == 1 else ["Independent judge 1", "Independent judge 2"]
    )
    titles = [f"{label} rereads the record, blind to the verdict" for label in labels]
    live_judges = [c for c in versions[-1][1:] if "judge" in c["title"].lower()]
    assert [c["title"] for c in live_judges if c["title"] in titles] == titles
    assert all(c["output"].startswith("independent judge: decide") for c in live_judges[-judges:])
    shown = {c["title"]: c for c in final.chunks[1:]}
    confidence = f"{result.verdict.confidence:.2f} ({result.verdict.level.value})"
    for label, check in zip(titles, result.judgments, strict=True):
        agrees = "agrees" if check.agrees else "disagrees"
        assert shown[label]["status"] == "complete"
        assert shown[label]["output"] == (
            f"independent judge: {check.decision}, {agrees} with the verdict;"
            f" verdict confidence {confidence}"
        )
    joined = json.dumps(final.chunks)
    assert "judge-1 votes" not in joined
    assert " phase: judge" not in joined
    assert "None" not in joined


async def test_a_judge_that_gave_no_decision_is_shown_as_an_error_with_the_reason() -> None:
    result, _live, _versions = await followed(spec_for("consensus"))
    [check] = result.judgments
    failed = result.model_copy(
        update={
            "judgments": [
                check.model_copy(
                    update={"decision": None, "agrees": None, "error": "the judge failed: timeout"}
                )
            ]
        }
    )
    final = Plan.of_result(7, failed).closed(failed)
    [judge] = [c for c in final.chunks[1:] if c["title"].startswith("Independent judge")]
    assert judge["status"] == "error"
    assert judge["output"] == "independent judge: no decision (the judge failed: timeout)"


def hostile_spec(question: str, stance: str) -> DebateSpec:
    debaters = [
        Participant(role=Role.DEBATER, model=FAKE, name=f"for {HOSTILE}", stance=stance),
        Participant(role=Role.DEBATER, model=FAKE, name="against", stance=f"not {stance}"),
    ]
    return DebateSpec(
        question=question,
        protocol="stances",
        default_model=FAKE,
        max_rounds=1,
        participants=debaters,
    )


async def test_every_text_is_escaped_once_and_kept_within_slacks_limits() -> None:
    spec = hostile_spec(f"Adopt {HOSTILE}? " + "x&y " * 10_000, f"{HOSTILE} " * 18)
    result, _plan, versions = await followed(spec)
    final = Plan.of_result(7, result).closed(result)

    for version in [*versions, final.chunks]:
        sdk_valid(version)
        texts = [c.get("title", "") + c.get("output", "") for c in version]
        joined = " ".join(texts)
        assert "<" not in joined
        assert ">" not in joined
        assert "&amp;lt;" not in joined, "escaped once"
    assert "&lt;!channel&gt; *bold* &lt;https://x|y&gt;" in final.chunks[0]["title"]
    assert any("for &lt;!channel&gt;" in c.get("title", "") for c in final.chunks)
    # The closing blocks are messages' blocks, escaped by the same rules.
    closing = kit.Message("closing", final.closing)
    valid(closing)
    assert len(final.closing) <= 50


async def test_the_plan_as_a_message_fits_one_message_with_its_closing() -> None:
    spec = hostile_spec(f"Adopt {HOSTILE}?", "w " * 290)
    result, plan, _versions = await followed(spec)
    for n in range(300):
        plan.finished(result.transcript[0].model_copy(update={"round": n + 2}))
    content = plan.closed(result)

    message = as_message(content, 7)
    valid(message)
    assert message.text == "Debate #7: " + result.verdict.decision.value
    assert message.blocks[-1]["type"] == "context_actions", "the feedback buttons stay"
    assert "debate_stop" not in str(message.blocks), "no Stop once it ended"
    live = as_message(plan.live(), 7)
    valid(live)
    assert "still running" in str(live.blocks[-2])
    [stop] = live.blocks[-1]["elements"]
    assert (stop["action_id"], stop["value"]) == ("debate_stop", "7"), "Stop while it runs"
    assert "&amp;lt;" not in str(message.blocks)


def task(ident: str, status: str, output: str = "") -> dict[str, Any]:
    chunk = {"type": "task_update", "id": ident, "title": f"Task {ident}", "status": status}
    return {**chunk, "output": output} if output else chunk


def test_a_newer_version_sends_only_what_changed() -> None:
    title = {"type": "plan_update", "title": "Debate #7"}
    sent = [title, task("a", "complete", "done"), task("b", "in_progress")]
    owed = [
        title,
        task("a", "complete", "done"),
        task("b", "complete", "3 points"),
        task("c", "pending"),
    ]

    changed = delta(sent, owed)

    assert changed == [task("b", "complete", "3 points"), task("c", "pending")]
    assert merged(sent, changed) == owed
    assert delta(owed, owed) == []


def test_the_stop_closes_a_task_the_final_plan_does_not_name() -> None:
    sent = [task("a", "complete", "done"), task("gone", "in_progress")]
    final = StreamContent(
        chunks=[task("a", "complete", "done")], label="x", closing=[{"type": "divider"}]
    )

    assert closing_chunks(sent, final) == [task("gone", "error", "not finished")]


def test_a_row_holds_its_content_whole() -> None:
    content = StreamContent(
        chunks=[{"type": "plan_update", "title": "t"}, task("a", "pending")],
        label="Debate #7: accept",
        closing=[{"type": "divider"}],
    )
    text, blocks = content.stored()
    assert StreamContent.of_row(text, blocks) == content
    assert (
        StreamContent.of_row(*StreamContent(chunks=[task("a", "pending")]).stored()).final is False
    )


async def test_a_debate_that_fails_closes_what_ran_as_errors() -> None:
    spec = spec_for("adversarial")
    result, plan, _versions = await followed(spec)
    failed = result.model_copy(
        update={
            "verdict": result.verdict.model_copy(update={"status": DebateStatus.FAILED}),
            "transcript": result.transcript[:2],
        }
    )
    stopped = Plan.of_result(7, failed)
    statuses = {t.title: (t.status, t.output) for t in stopped.tasks.values()}
    assert statuses["Round 1: proposer makes the case"][0] is TaskStatus.COMPLETE
    assert statuses["Round 1: critic challenges the proposal"] == (
        TaskStatus.ERROR,
        "not run: the debate failed",
    )
    assert stopped.tasks["checks"].status is TaskStatus.ERROR
    assert "failed" in stopped.title
    assert plan.tasks, "the run it came from had its tasks"
