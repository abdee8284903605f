"""Every protocol whose verdict comes from a model call after a record the independent judges
read blind asks its judges beside its last call, not after it: stances (beside the judge, or
the synthesizer when there is one), structured (beside the ruling), panel with a judge choosing
the answer. A run stopped between a judge's answer and the last call's resumes asking only the
deciding calls. Consensus (the deciding vote is part of the record) and panel without a judge
(no model decides) have nothing to run beside."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from engine.events import DebateEvent, TurnFinished, TurnStarted
from engine.llm import LLMRequest
from engine.models import DebateSpec, DebateStatus, Role, TurnRecord, Usage
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import SCHEMA_BY_ROLE, DebateScript, shipped_prompts
from tests.unit import test_adversarial, test_panel, test_stances, test_structured

JUDGE = "IndependentJudgment"


@dataclass(frozen=True)
class Case:
    """A protocol's debate: its spec, a fresh script's reply function, and the schema of its
    last call, beside which the judges run."""

    spec: DebateSpec
    script: Callable[[], Callable[[LLMRequest], Any]]
    last: str


PANEL_ANSWERS = {
    "ana": (test_panel.SIMILAR_A, 0.6),
    "ben": (test_panel.DIFFERENT, 0.9),
    "cy": (test_panel.SIMILAR_B, 0.7),
}
TWO_STANCES = {"alice": "keep PostgreSQL", "bob": "move to DynamoDB"}

CASES = {
    "stances": Case(
        test_stances.spec(TWO_STANCES, rounds=1),
        lambda: test_stances.Script(scores=(5, 8)),
        "StancesJudgment",
    ),
    "stances with a synthesizer": Case(
        test_stances.spec(
            TWO_STANCES, rounds=1, synthesizer=True, output_schema=test_stances.SCHEMA
        ),
        lambda: test_stances.Script(scores=(5, 8)),
        "SynthesisOutput",
    ),
    "structured": Case(
        test_structured.SPEC,
        test_structured.Script,
        "Ruling",
    ),
    "panel judged": Case(
        test_panel.spec(rounds=1, aggregation="judge"),
        lambda: (
            test_panel.panel(
                PANEL_ANSWERS, judge={"chosen": 2, "reasoning": "Operating cost decides it."}
            ).function
        ),
        "PanelJudgment",
    ),
}


async def answer(script: Callable[[LLMRequest], Any], request: LLMRequest) -> Any:
    """`script`'s reply to `request`, whether it answers at once or awaits."""
    reply = script(request)
    return await reply if inspect.isawaitable(reply) else reply


def run(case: Case, llm: FunctionLLM, **more: Any) -> Any:
    return run_debate(case.spec, resolve_llm=lambda _: llm, prompts=shipped_prompts(), **more)


@pytest.mark.parametrize("name", list(CASES))
async def test_the_judge_is_asked_while_the_last_call_is_still_answering(name: str) -> None:
    case = CASES[name]
    script = case.script()
    judge_asked = asyncio.Event()

    async def last_waits_for_the_judge(request: LLMRequest) -> Any:
        if request.schema_name == JUDGE:
            judge_asked.set()
        if request.schema_name == case.last:
            # Asked one after the other, the judge would come after this answer: a deadlock
            # that the generous limit turns into a failure.
            await asyncio.wait_for(judge_asked.wait(), timeout=30)
        return await answer(script, request)

    llm = FunctionLLM(last_waits_for_the_judge)
    result = await run(case, llm)

    assert result.status is DebateStatus.COMPLETE, result.error
    [check] = result.judgments
    assert check.decision is not None
    assert check.error is None
    asked = [c.schema_name for c in llm.calls]
    assert asked.count(JUDGE) == 1
    # The judge starts once the last call is under way: beside it, never ahead of it.
    assert asked.index(JUDGE) > asked.index(case.last)


@pytest.mark.parametrize("name", list(CASES))
async def test_a_run_stopped_after_the_judge_answered_resumes_asking_only_the_last_call(
    name: str,
) -> None:
    case = CASES[name]
    script = case.script()
    never = asyncio.Event()
    stored: list[TurnRecord] = []

    async def last_never_answers(request: LLMRequest) -> Any:
        if request.schema_name == case.last:
            await never.wait()
        return await answer(script, request)

    async def store(event: DebateEvent) -> None:
        if isinstance(event, TurnFinished) and not event.replayed:
            stored.append(event.turn)

    first = FunctionLLM(last_never_answers)
    running = asyncio.ensure_future(run(case, first, sink=store))
    for _ in range(3_000):  # a generous bound: asked only after the last call, it never comes
        if any(t.role is Role.INDEPENDENT_JUDGE for t in stored):
            break
        await asyncio.sleep(0.01)
    assert any(t.role is Role.INDEPENDENT_JUDGE for t in stored), "the judge was not asked early"
    # The process dies here: the judge's answer is stored, the last call's never came.
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert [c.schema_name for c in first.calls].count(case.last) == 1, "the last call was asked"
    assert len(stored) == len(first.calls) - 1, "every call but the last one answered"

    again = FunctionLLM(case.script())
    result = await run(case, again, recorded=stored)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert [c.schema_name for c in again.calls] == [case.last], "only the unanswered call"
    [check] = result.judgments
    assert check.decision is not None
    [judged] = [t for t in result.transcript if t.role is Role.INDEPENDENT_JUDGE]
    assert judged == next(t for t in stored if t.role is Role.INDEPENDENT_JUDGE)


ONE_CALL_AT_A_TIME = Pricing(output_per_mtok=1_000.0)
"""Every call's worst case is its 1,024 tokens out at $1,000 a million: $1.02; each costs $0.01
(`Usage` below), so a $1.50 budget affords any call alone and never two at once."""


@pytest.mark.parametrize(
    "name",
    # The panel's panelists answer at once, which this budget never affords.
    ["adversarial", *(n for n in CASES if not n.startswith("panel"))],
)
async def test_the_judge_waits_for_the_last_call_to_hold_its_worst_case(name: str) -> None:
    """A judge beside the last call never takes the room that call needs: it starts once the
    call holds its worst case, so the budget affords the protocol's own calls as it would one
    after another; a judge it then refuses is asked after the verdict."""
    if name == "adversarial":
        case = Case(
            test_adversarial.make_spec(budget_usd=1.5), DebateScript, SCHEMA_BY_ROLE["moderator"]
        )
    else:
        case = CASES[name]
        case = Case(case.spec.model_copy(update={"budget_usd": 1.5}), case.script, case.last)

    async def slow_to_announce(event: DebateEvent) -> None:
        # Writing a turn's start takes a while (a store, Slack), except for the judges': a
        # judge started at once would hold its worst case before the last call holds its own.
        if isinstance(event, TurnStarted) and event.role is not Role.INDEPENDENT_JUDGE:
            for _ in range(50):
                await asyncio.sleep(0)

    script = case.script()

    async def judges_take_their_time(request: LLMRequest) -> Any:
        if request.schema_name == JUDGE:
            for _ in range(200):  # still in flight when the last call's start is written
                await asyncio.sleep(0)
        return await answer(script, request)

    llm = FunctionLLM(
        judges_take_their_time,
        pricing=ONE_CALL_AT_A_TIME,
        usage=Usage(input_tokens=0, output_tokens=10),
    )
    result = await run(case, llm, sink=slow_to_announce)

    assert result.status is DebateStatus.COMPLETE, result.error
    [check] = result.judgments
    assert check.decision is not None, check.error


@pytest.mark.parametrize("name", list(CASES))
async def test_a_run_stopped_after_the_last_call_answered_resumes_asking_only_the_judge(
    name: str,
) -> None:
    """Replayed, the last call lets the judges beside it start at once."""
    case = CASES[name]
    first = await run(case, FunctionLLM(case.script()))
    assert first.status is DebateStatus.COMPLETE, first.error
    answered = [t for t in first.transcript if t.role is not Role.INDEPENDENT_JUDGE]

    again = FunctionLLM(case.script())
    result = await run(case, again, recorded=answered)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert [c.schema_name for c in again.calls] == [JUDGE]
    [check] = result.judgments
    assert check.decision is not None
