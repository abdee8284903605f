"""Each of the four other protocols runs one real debate on the local model (SmolLM2 through
llama.cpp): real generation, real validation and re-asks, every turn recorded."""

from __future__ import annotations

from typing import Any

import pytest

from bot.settings import RoleModel, Settings
from bot.wiring import DebateServices, build_services
from engine.models import DebateStatus, Role
from engine.runner import run_debate
from tests.helpers import local_threads

pytestmark = pytest.mark.local_model

QUESTION = "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?"


@pytest.fixture(scope="module")
def services() -> DebateServices:
    # The pipeline is under test, not the prose: 512 tokens hold any reply the grammar allows
    # except the structured judge's, which gets its own budget below.
    settings = Settings(provider="local", local_threads=local_threads(), max_tokens=512)
    return build_services(settings)


CASES: dict[str, dict[str, Any]] = {
    "stances": {"stances_for": ["keep cron"], "stances_against": ["move to CronJobs"]},
    "consensus": {},
    "panel": {},
    # The judge scores six arguments and writes a trace row for each: more than 1,024 tokens.
    "structured": {"overrides": {"judge": RoleModel(max_tokens=3072)}},
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
