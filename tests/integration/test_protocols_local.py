"""Each of the four other protocols runs one real debate on the local model (SmolLM2 through
llama.cpp): real generation, real validation and re-asks, every turn recorded. The grammar's
bounds keep every reply within max_tokens. These debates ask for 512 tokens a call, not the
default 1,024: the largest of their replies' grammars needs 496, and the model writes to its
bounds, so the smaller bound shortens the run's longest chain of tests. The default is run on
the model by the CLI's own debate (test_local_model.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.settings import Settings
from bot.wiring import DebateServices, build_services
from engine.confidence import Component
from engine.models import DebateStatus, Role
from engine.runner import run_debate
from tests.helpers import local_threads

pytestmark = pytest.mark.local_model

MAX_TOKENS = 512
"""Room for the largest reply grammar these protocols ask for (a structured side judgment)."""
QUESTION = "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?"


@pytest.fixture
async def services() -> AsyncIterator[DebateServices]:
    """Services of each test's own: the model's child process and its lock belong to one event
    loop, and each test runs in a loop of its own."""
    built = build_services(
        Settings(provider="local", local_threads=local_threads(), max_tokens=MAX_TOKENS)
    )
    yield built
    await built.aclose()


CASES: dict[str, dict[str, Any]] = {
    "stances": {"stances_for": ["keep cron"], "stances_against": ["move to CronJobs"]},
    "consensus": {},
    "panel": {},
    "structured": {},
}


@pytest.mark.parametrize("protocol", list(CASES))
async def test_protocol_runs_a_real_debate_on_the_local_model(
    services: DebateServices, protocol: str
) -> None:
    spec = services.policy.spec(QUESTION, protocol=protocol, rounds=1, **CASES[protocol])
    result = await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert result.transcript
    assert {turn.provider for turn in result.transcript} == {"local"}
    assert all(turn.usage.output_tokens > 0 for turn in result.transcript)
    assert result.report is not None
    speakers = {turn.speaker for turn in result.transcript if turn.role is Role.DEBATER}
    assert len(speakers) >= 2, "every protocol here has at least two debaters"
    assert result.verdict.synthesis
    # The independent judge re-reads the record on the same model and gives a decision.
    [judged] = result.judgments
    assert judged.provider == "local"
    assert judged.decision is not None, judged.error
    assert result.verdict.components is not None
    assert result.verdict.components.value(Component.AGREEMENT) in (0.0, 1.0)
    if protocol == "structured":
        judge = [t.phase for t in result.transcript if t.role is Role.JUDGE]
        assert judge == ["PRO", "CON", "ruling"]
        arguments = [
            a["id"] for side in ("PRO", "CON") for a in result.report["openings"][side]["arguments"]
        ]
        assert list(result.report["weighted_scores"]) == arguments
        assert [row["argument"] for row in result.report["trace"]] == arguments
