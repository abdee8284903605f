"""The local model (SmolLM2 through llama.cpp) and the protocols: every reply schema of every
protocol becomes a llama.cpp grammar, and two protocols run one real debate each on the model,
with real generation, validation and re-asks, every turn recorded: consensus, whose phases
follow the votes the model casts, and structured, whose replies must pass checks no grammar
expresses (arguments numbered in order, every opposing argument answered once). The adversarial
protocol runs on the model in the CLI's own debate (test_local_model.py) and in eval
(test_eval.py). Stances and panel run on the fake model everywhere else: their one-round flows
do not depend on what the model writes, and the grammar makes their replies valid.

The debates ask for 512 tokens a call, not the default 1,024 (the CLI's debate runs that): the
largest reply grammar here needs 496, and the model writes near its grammar's bounds, so the
smaller bound shortens the run's longest chain of tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from bot.settings import Settings
from bot.wiring import DebateServices, build_services
from engine.confidence import Component
from engine.models import DebateStatus, Role
from engine.providers.fake import SchemaFillingLLM
from engine.providers.grammar import fitted_schema
from engine.runner import run_debate
from tests.helpers import local_threads

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


CASES: dict[str, dict[str, Any]] = {"consensus": {}, "structured": {}}
EVERY_PROTOCOL: dict[str, dict[str, Any]] = {
    "adversarial": {},
    "stances": {"stances_for": ["keep cron"], "stances_against": ["move to CronJobs"]},
    "consensus": {},
    "panel": {},
    "structured": {},
}


@pytest.mark.parametrize("protocol", list(EVERY_PROTOCOL))
async def test_every_reply_schema_of_a_protocol_becomes_a_llama_cpp_grammar(protocol: str) -> None:
    """What the local provider hands llama.cpp for each reply a debate asks for: the schema
    fitted to the call's max_tokens, converted to a grammar by llama-cpp-python itself."""
    services = build_services(Settings(provider="local"))
    spec = services.policy.spec(QUESTION, protocol=protocol, rounds=1, **EVERY_PROTOCOL[protocol])
    filler = SchemaFillingLLM(seed=3)
    await run_debate(spec, resolve_llm=lambda _model: filler, prompts=services.prompts)
    assert filler.calls
    for request in filler.calls:
        assert request.output_schema is not None
        fitted = fitted_schema(request.output_schema, request.max_tokens, request.schema_name or "")
        grammar = json_schema_to_gbnf(json.dumps(fitted))
        assert grammar.startswith("root ::=") or "\nroot ::=" in grammar, request.schema_name


@pytest.mark.local_model
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
