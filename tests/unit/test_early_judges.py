"""The independent judges run beside the last moderation (they read the record blind to it), so
the verdict waits for one call less; their answers count as before, and a run stopped between
the judge's answer and the moderator's resumes without asking the stored judge again."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.events import DebateEvent, TurnFinished
from engine.llm import LLMRequest
from engine.models import DebateStatus, Role, TurnRecord
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import SCHEMA_BY_ROLE, DebateScript, shipped_prompts
from tests.unit.test_adversarial import make_spec

JUDGE = "IndependentJudgment"
MODERATOR = SCHEMA_BY_ROLE["moderator"]


class Gated:
    """The scripted debate, whose moderator answers only once `open` is set."""

    def __init__(self) -> None:
        self.script = DebateScript()
        self.judge_asked = asyncio.Event()
        self.open = asyncio.Event()

    async def __call__(self, request: LLMRequest) -> Any:
        if request.schema_name == JUDGE:
            self.judge_asked.set()
        if request.schema_name == MODERATOR:
            await self.open.wait()
        return self.script(request)


async def test_the_judge_is_asked_while_the_moderator_is_still_answering() -> None:
    gated = Gated()

    async def moderator_waits_for_the_judge(request: LLMRequest) -> Any:
        if request.schema_name == MODERATOR:
            # Asked one after the other, the judge would come after this answer: a deadlock
            # that the generous limit turns into a failure.
            await asyncio.wait_for(gated.judge_asked.wait(), timeout=30)
        return await gated(request)

    gated.open.set()
    llm = FunctionLLM(moderator_waits_for_the_judge)
    result = await run_debate(make_spec(), resolve_llm=lambda _: llm, prompts=shipped_prompts())

    assert result.status is DebateStatus.COMPLETE
    [check] = result.judgments
    assert check.decision is not None
    assert {t.role for t in result.transcript} >= {Role.MODERATOR, Role.INDEPENDENT_JUDGE}
    assert [c.schema_name for c in llm.calls].count(JUDGE) == 1


async def test_no_early_judge_when_another_round_may_follow() -> None:
    """In a round before the last, the moderator may ask for another round: the record the
    judges read is not final, so they wait for the verdict."""
    script = DebateScript()
    llm = FunctionLLM(script)
    spec = make_spec(max_rounds=2)
    result = await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts())
    assert result.status is DebateStatus.COMPLETE
    order = [c.schema_name for c in llm.calls]
    assert order.index(JUDGE) > order.index(MODERATOR)
    assert order.count(JUDGE) == 1


async def test_a_run_stopped_after_the_judge_answered_resumes_without_asking_it_again() -> None:
    gated = Gated()
    stored: list[TurnRecord] = []

    async def store(event: DebateEvent) -> None:
        if isinstance(event, TurnFinished) and not event.replayed:
            stored.append(event.turn)

    first = FunctionLLM(gated)
    run = asyncio.ensure_future(
        run_debate(make_spec(), resolve_llm=lambda _: first, prompts=shipped_prompts(), sink=store)
    )
    for _ in range(3_000):  # a generous bound: asked only after the moderator, it never comes
        if any(t.role is Role.INDEPENDENT_JUDGE for t in stored):
            break
        await asyncio.sleep(0.01)
    assert any(t.role is Role.INDEPENDENT_JUDGE for t in stored), "the judge was not asked early"
    # The process dies here: the judge's answer is stored, the moderator's never came.
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    assert Role.MODERATOR not in {t.role for t in stored}

    again = FunctionLLM(DebateScript())
    result = await run_debate(
        make_spec(), resolve_llm=lambda _: again, prompts=shipped_prompts(), recorded=stored
    )
    assert result.status is DebateStatus.COMPLETE
    asked = [c.schema_name for c in again.calls]
    assert asked == [MODERATOR], "only the unanswered call is asked; the stored judge is replayed"
    [check] = result.judgments
    stored_judge = next(t for t in stored if t.role is Role.INDEPENDENT_JUDGE)
    assert check.decision == stored_judge.parsed["decision"]
    assert sum(1 for t in result.transcript if t.role is Role.INDEPENDENT_JUDGE) == 1


async def test_judges_in_flight_stop_with_a_stopped_run() -> None:
    answered: list[str] = []
    gate = asyncio.Event()
    judging = asyncio.Event()
    script = DebateScript()

    async def slow(request: LLMRequest) -> Any:
        if request.schema_name in (JUDGE, MODERATOR):
            if request.schema_name == JUDGE:
                judging.set()
            await gate.wait()
            answered.append(request.schema_name or "")
        return script(request)

    llm = FunctionLLM(slow)
    run = asyncio.ensure_future(
        run_debate(make_spec(), resolve_llm=lambda _: llm, prompts=shipped_prompts())
    )
    await asyncio.wait_for(judging.wait(), timeout=30)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    gate.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert answered == [], "nothing asked for the stopped run goes on"
