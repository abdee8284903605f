"""A debate's live plan, streamed into its thread as Slack's plan: one task per turn, in the
order each protocol runs them (framing, each round's turns, moderation or judging), then the
checks; each task pending, in progress, complete or in error as the engine reports, with a
one-line summary of what the turn said ("critic: 3 objections, strength 7/10").

Values only. `Plan` folds a run's events, or at the end its stored transcript, into tasks (the
same tasks either way, so a resumed run continues the plan it streamed); `StreamContent` is
what an outbox row holds of it: the plan as `plan_update` and `task_update` chunks, and, once
the debate has ended, the blocks the stop puts under it. `delta` is what a newer version adds
to what Slack already has, and `as_message` the plan as a normal message, for a stream that
could not be continued.

Slack's rules this follows (the chat.startStream, chat.appendStream and chat.stopStream
reference; slack_sdk's `PlanUpdateChunk`, `TaskUpdateChunk` and `BlocksChunk`): a task's status
is one of `pending`, `in_progress`, `complete`, `error`, and a later `task_update` with the same
`id` replaces its title, status and output; the stop's `blocks` (at most 50, apart from any in
chunks) are rendered under the finished message. No `markdown_text` is sent: the plan is all
chunks (a stream keeps the shape it was started with, and the verdict's summary goes in the
stop's blocks, escaped as every message is). Task titles and outputs are kept to 256
characters. Every title, summary and text is escaped once, as messages are, so nothing in a
plan can mention `@here` or disguise a link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.messages import posts
from bot.messages.kit import (
    MAX_BLOCKS,
    Block,
    Message,
    clip,
    context,
    escape,
    fit,
    sections,
)
from engine.events import TurnStarted, TurnStreaming
from engine.models import DebateResult, DebateSpec, DebateStatus, JudgeCheck, Role, TurnRecord
from engine.protocols import definition_for
from engine.protocols.definition import JUDGING, TURNS, TurnKey, plural

MAX_TASK_TEXT_CHARS = 256
"""A task's title and summary are kept within this. Slack's reference states no limit; SDKs
built on the API (Microsoft's Agents SDK: "Maximum 256 characters" for `details` and `output`)
and reports from other apps put it here, and a summary is one line anyway."""
MAX_PLAN_TITLE_CHARS = 150
PLAN_MESSAGE_CHARS = 9_000
"""The plan as a normal message, kept under a message's 12,000 characters with its closing."""
NOT_PART_OF_THE_PLAN = frozenset({Role.TRIAGE, Role.REVIEWER})
"""Turns asked before the debate (or outside one), which the plan does not show."""
JUDGING_ROLES = frozenset({Role.JUDGE, Role.SYNTHESIZER})
SPEAKING_ROLES = frozenset(
    {Role.PROPOSER, Role.CRITIC, Role.REBUTTAL, Role.MODERATOR, Role.DEBATER}
)
"""The roles whose turns are a round's speaking turns (announced together)."""


class TaskStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETE = "complete"
    ERROR = "error"


STATUS_EMOJI = {
    TaskStatus.PENDING: ":white_circle:",
    TaskStatus.IN_PROGRESS: ":hourglass_flowing_sand:",
    TaskStatus.COMPLETE: ":white_check_mark:",
    TaskStatus.ERROR: ":x:",
}
DONE = frozenset({TaskStatus.COMPLETE, TaskStatus.ERROR})
ENDING_LABEL = {
    DebateStatus.COMPLETE: "done",
    DebateStatus.TRUNCATED_BUDGET: "stopped at the budget ceiling",
    DebateStatus.FAILED: "failed",
    DebateStatus.CANCELLED: "stopped",
}
CHECKS = "checks"
STREAMED_TAIL_CHARS = 200
"""How much of a turn being written its task shows: the end of what is written so far, within
the task's 256 characters once escaped and prefixed."""
WRITING = "writing: "
PARTS = " \u00b7 "
"""Between the lines of a turn being written (its fields, and the lines within them)."""
REASKED = "re-asked: the reply did not fit its form, so it does not count; asking again"


@dataclass
class Task:
    """One line of the plan; `title` and `output` as people read them (escaped when rendered)."""

    id: str
    title: str
    status: TaskStatus = TaskStatus.PENDING
    output: str = ""
    reasks: int = 0
    """How often the turn's reply, shown as it was written, failed validation and was asked
    again: said before the new reply's text, so the re-ask shows even when Slack is sent only
    a later version."""


def task_id(key: TurnKey) -> str:
    """A short id for a turn that every process derives alike (speakers are free text)."""
    number, role, speaker, phase, attempt = key
    tail = hashlib.sha1(f"{speaker}\x00{phase}".encode()).hexdigest()[:8]
    return f"r{number}-{role.value}-{tail}-{attempt}"


@dataclass
class Plan:
    """The tasks of one debate, in the order they were first known."""

    debate_id: int
    spec: DebateSpec
    tasks: dict[str, Task] = field(default_factory=dict)
    title: str = ""
    stages: set[tuple[int, str, str]] = field(default_factory=set)
    judges: dict[str, str] = field(default_factory=dict)
    """Each independent judge's task (by the judge's name, as the verdict's checks name it)."""

    def __post_init__(self) -> None:
        if not self.title:
            self.title = (
                f"Debate #{self.debate_id} \u00b7 {self.spec.protocol}:"
                f" {clip(self.spec.question, 90)}"
            )

    # --- what the engine reports ----------------------------------------------------------

    def started(self, event: TurnStarted) -> bool:
        """A turn starts: its round's tasks are announced, its own is in progress. Whether
        anything changed."""
        key = (event.round, event.role, event.speaker, event.phase, event.attempt)
        return self._move(key, TaskStatus.IN_PROGRESS, "")

    def streaming(self, event: TurnStreaming) -> bool:
        """A turn whose start the plan has seen is being written: its task shows the readable
        text so far (its end, when long; the engine sends prose only, never JSON), or that the
        reply it showed failed validation and is asked again. Whether anything changed."""
        task = self.tasks.get(task_id(event.key))
        if task is None or task.status in DONE:
            # Not shown (a triage turn), or already ended: nothing of it is written any more.
            return False
        if event.reasked:
            task.reasks += 1
            return self._move(event.key, TaskStatus.IN_PROGRESS, REASKED)
        text = PARTS.join(
            " ".join(line.split()) for line in event.text.splitlines() if line.strip()
        )
        if not text:
            return False
        if len(text) > STREAMED_TAIL_CHARS:
            text = "\u2026" + text[-(STREAMED_TAIL_CHARS - 1) :]
        again = f"re-asked {plural(task.reasks, 'time')}{PARTS}" if task.reasks else ""
        return self._move(event.key, TaskStatus.IN_PROGRESS, again + WRITING + text)

    def finished(self, turn: TurnRecord) -> bool:
        """A turn ended (asked now, or replayed from the record): complete, with its summary."""
        return self._move(turn.key, TaskStatus.COMPLETE, summary(self.spec, turn))

    def ended(self, result: DebateResult) -> None:
        """The debate ended: the checks' outcome; what did not run is said (an error when the
        debate stopped short, `not needed` when it ended early by its own rule)."""
        status = result.verdict.status
        why = {
            DebateStatus.TRUNCATED_BUDGET: "the budget ceiling was reached",
            DebateStatus.FAILED: "the debate failed",
            DebateStatus.CANCELLED: result.error or "the debate was stopped",
        }.get(status)
        for task in self.tasks.values():
            if task.status in DONE:
                continue
            if why is None:
                task.status, task.output = TaskStatus.COMPLETE, task.output or "not needed"
            else:
                cut = task.status is TaskStatus.IN_PROGRESS
                task.status, task.output = (
                    TaskStatus.ERROR,
                    f"{'stopped' if cut else 'not run'}: {why}",
                )
        for check in result.judgments:
            self._judged(check, result)
        self.tasks[CHECKS] = Task(
            CHECKS,
            "Quality and citation checks",
            TaskStatus.ERROR if status is DebateStatus.FAILED else TaskStatus.COMPLETE,
            checks_summary(result),
        )
        self.title = (
            f"Debate #{self.debate_id} \u00b7 {ENDING_LABEL[status]}:"
            f" {clip(self.spec.question, 90)}"
        )

    def _judged(self, check: JudgeCheck, result: DebateResult) -> None:
        """An independent judge's task once the verdict is out: its decision as the debate
        states it (its turn may hold only the letters of the blind record), whether it agrees
        with the verdict, and the verdict's confidence that agreement is part of; an error
        when it gave no decision."""
        task = self.tasks.get(self.judges.get(check.judge, ""))
        if task is None:
            return
        if check.decision is None:
            task.status = TaskStatus.ERROR
            task.output = f"independent judge: no decision ({check.error or 'no answer'})"
            return
        agrees = "agrees with the verdict" if check.agrees else "disagrees with the verdict"
        task.status = TaskStatus.COMPLETE
        verdict = result.verdict
        task.output = (
            f"independent judge: {check.decision}, {agrees};"
            f" verdict confidence {verdict.confidence:.2f} ({verdict.level.value})"
        )

    @classmethod
    def of_result(cls, debate_id: int, result: DebateResult) -> Plan:
        """The plan of an ended debate, from its transcript: the tasks the live plan had."""
        plan = cls(debate_id=debate_id, spec=result.spec)
        for turn in result.transcript:
            plan.finished(turn)
        plan.ended(result)
        return plan

    def _move(self, key: TurnKey, status: TaskStatus, output: str) -> bool:
        role = key[1]
        if role in NOT_PART_OF_THE_PLAN:
            return False
        before = [(t.id, t.status, t.output) for t in self.tasks.values()]
        stage = self._stage(key)
        if stage not in self.stages:
            self.stages.add(stage)
            for expected in self._expected(stage):
                self._task(expected)
        task = self._task(key)
        if task.status is not TaskStatus.COMPLETE or status is TaskStatus.COMPLETE:
            task.status, task.output = status, output or task.output
        return before != [(t.id, t.status, t.output) for t in self.tasks.values()]

    def _task(self, key: TurnKey) -> Task:
        ident = task_id(key)
        if key[1] is Role.INDEPENDENT_JUDGE:
            self.judges[key[2]] = ident
        if ident not in self.tasks:
            self.tasks[ident] = Task(ident, title(self.spec, key))
        return self.tasks[ident]

    def _stage(self, key: TurnKey) -> tuple[int, str, str]:
        """The group a turn is announced with: a round (with its phase, for a protocol whose
        phases are stages), or the framing, the router, the judging of a round."""
        number, role, _speaker, phase, _attempt = key
        group = JUDGING if role in JUDGING_ROLES else role.value
        if role in SPEAKING_ROLES:
            group = TURNS
        return (number, phase if definition_for(self.spec.protocol).plan.phased else "", group)

    def _expected(self, stage: tuple[int, str, str]) -> list[TurnKey]:
        """The turns a stage will hold, as far as the spec tells (the protocol's order)."""
        number, phase, group = stage
        return definition_for(self.spec.protocol).plan.expected(self.spec, number, phase, group)

    # --- what Slack is sent ---------------------------------------------------------------

    def chunks(self) -> list[dict[str, Any]]:
        """The whole plan as stream chunks: its title, then every task."""
        found: list[dict[str, Any]] = [
            {"type": "plan_update", "title": fit(escape(self.title), MAX_PLAN_TITLE_CHARS)}
        ]
        for task in self.tasks.values():
            chunk: dict[str, Any] = {
                "type": "task_update",
                "id": task.id,
                "title": fit(escape(task.title), MAX_TASK_TEXT_CHARS),
                "status": task.status.value,
            }
            if task.output:
                chunk["output"] = fit(escape(task.output), MAX_TASK_TEXT_CHARS)
            found.append(chunk)
        return found

    def live(self) -> StreamContent:
        return StreamContent(chunks=self.chunks())

    def closed(self, result: DebateResult) -> StreamContent:
        """The final version: the plan, and the verdict's summary with the feedback buttons,
        which the stop renders under the finished plan (`chat.stopStream`'s `blocks`)."""
        blocks = [
            *posts.verdict_summary(result.verdict, result.cost_usd),
            posts.feedback_buttons(self.debate_id),
        ]
        if result.verdict.status is DebateStatus.CANCELLED:
            blocks.insert(0, posts.stopped_line(self.debate_id, result.error))
        label = f"Debate #{self.debate_id}: {result.verdict.decision.value}"
        return StreamContent(chunks=self.chunks(), label=label, closing=blocks)


# --- titles and summaries ------------------------------------------------------------------


def title(spec: DebateSpec, key: TurnKey) -> str:
    """A task's title, from the turn's identity alone (the same live and from the record): an
    independent judge's here (every protocol has them), the others the protocol's."""
    if key[1] is Role.INDEPENDENT_JUDGE:
        return f"{judge_label(spec, key[2])} rereads the record, blind to the verdict"
    return definition_for(spec.protocol).plan.title(spec, key)


def judge_label(spec: DebateSpec, speaker: str) -> str:
    """An independent judge as people read it: "Independent judge", numbered when the spec
    asks several (its speaker is `judge-<n>`, engine.judging)."""
    if spec.judges <= 1:
        return "Independent judge"
    number = speaker.removeprefix("judge-")
    return f"Independent judge {number if number.isdigit() else speaker}"


def summary(spec: DebateSpec, turn: TurnRecord) -> str:
    """What a finished turn said, in one line of counts and choices (no model prose)."""
    if turn.role is Role.INDEPENDENT_JUDGE:
        decision = str(turn.parsed.get("decision") or "")
        if not decision or decision.startswith("Position "):
            # The blind record's letters name no debater (and are swapped for some judges):
            # the decision is named once the verdict is out (`Plan.ended`).
            return "independent judge: decided; compared with the verdict when it is out"
        return f"independent judge: decides {decision}; compared with the verdict when it is out"
    return definition_for(spec.protocol).plan.summary(spec, turn)


def checks_summary(result: DebateResult) -> str:
    """The runner's checks of the outcome: flags raised and quotes not found."""
    if result.verdict.status is DebateStatus.FAILED and not result.transcript:
        return "not run: the debate failed"
    unverified = sum(1 for check in result.citations if not check.verified)
    flags = ", ".join(flag.value for flag in result.flags)
    said = f"flags: {flags}" if flags else "no flags"
    quotes = f"{plural(unverified, 'quote')} not found" if unverified else "every quote found"
    return f"checks: {said}; {quotes}"


# --- what an outbox row holds ----------------------------------------------------------------


@dataclass(frozen=True)
class StreamContent:
    """A stream row's content: the plan's chunks and, once the debate has ended, the blocks
    the stop puts under it (`closing`) and a plain `label` for the message's notification
    text. Stored as the row's text (the label: empty while the debate runs) and blocks (the
    chunks, then the closing as one `blocks` chunk, slack_sdk's `BlocksChunk`)."""

    chunks: list[dict[str, Any]]
    label: str = ""
    closing: list[Block] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return bool(self.closing)

    def stored(self) -> tuple[str, list[dict[str, Any]]]:
        tail = [{"type": "blocks", "blocks": self.closing}] if self.closing else []
        return self.label, [*self.chunks, *tail]

    @classmethod
    def of_row(cls, text: str, blocks: Sequence[dict[str, Any]]) -> StreamContent:
        chunks = [dict(b) for b in blocks if b.get("type") != "blocks"]
        closing = [list(b["blocks"]) for b in blocks if b.get("type") == "blocks"]
        return cls(chunks=chunks, label=text, closing=closing[0] if closing else [])


def _identity(chunk: dict[str, Any]) -> tuple[str, str]:
    return (str(chunk.get("type")), str(chunk.get("id", "")))


def delta(sent: Sequence[dict[str, Any]], owed: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks of `owed` that Slack does not have as they are (new, or changed)."""
    have = {_identity(chunk): chunk for chunk in sent}
    return [chunk for chunk in owed if have.get(_identity(chunk)) != chunk]


def closing_chunks(sent: Sequence[dict[str, Any]], content: StreamContent) -> list[dict[str, Any]]:
    """What the stop sends: what changed, and any task Slack shows unfinished that the final
    plan does not name, closed as an error (a turn cut short before it was recorded)."""
    owed = {_identity(chunk) for chunk in content.chunks}
    stray = [
        {**chunk, "status": TaskStatus.ERROR.value, "output": "not finished"}
        for chunk in sent
        if chunk.get("type") == "task_update"
        and _identity(chunk) not in owed
        and chunk.get("status") not in (TaskStatus.COMPLETE.value, TaskStatus.ERROR.value)
    ]
    return [*delta(sent, content.chunks), *stray]


def first_words(sent: Sequence[dict[str, Any]], owed: Sequence[dict[str, Any]]) -> bool:
    """Whether `owed` shows a turn's text being written where what Slack has (`sent`) shows
    none of it yet: a turn's first words, which go before the channel's other waiting writes."""
    shown = {
        chunk.get("id"): str(chunk.get("output", ""))
        for chunk in sent
        if chunk.get("type") == "task_update"
    }
    return any(
        chunk.get("type") == "task_update"
        and WRITING in str(chunk.get("output", ""))
        and WRITING not in shown.get(chunk.get("id"), "")
        for chunk in owed
    )


def merged(sent: Sequence[dict[str, Any]], taken: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Slack has once it took `taken` on top of `sent`."""
    result = {_identity(chunk): dict(chunk) for chunk in sent}
    for chunk in taken:
        result[_identity(chunk)] = dict(chunk)
    return list(result.values())


def as_message(content: StreamContent, debate_id: int) -> Message:
    """The plan as a normal message (its chunks are escaped already), with the closing under
    it once the debate ended: what a stream that could not be continued becomes. While the
    debate runs it carries the Stop button (a streamed plan cannot: Slack's own Stop on the
    agent session, or the parent's button, stands for it)."""
    title = next(
        (str(c["title"]) for c in content.chunks if c.get("type") == "plan_update"), "Plan"
    )
    lines = [
        f"{STATUS_EMOJI.get(TaskStatus(str(c['status'])), '')} {c['title']}"
        + (f" \u2014 _{c['output']}_" if c.get("output") else "")
        for c in content.chunks
        if c.get("type") == "task_update"
    ]
    body = fit("\n".join(lines), PLAN_MESSAGE_CHARS) if lines else "_No turn has started yet._"
    blocks: list[Block] = [*sections(f"*{title}*\n{body}")]
    running = [
        context("The debate is still running; this plan follows it."),
        posts.stop_button(debate_id),
    ]
    blocks += content.closing or running
    return Message(content.label or title, blocks[:MAX_BLOCKS])
