"""No cache paid for in vain (issue 47 item 4): a request marks a prefix for Anthropic's cache
(`cache_control`, a write billed at 1.25x the input price) only where a later call of the
debate on the same model reads it, or where an earlier one wrote what it reads."""

from __future__ import annotations

import json
from typing import Any

from engine.models import (
    DebateSpec,
    DebateStatus,
    ModelSettings,
    Participant,
    Role,
)
from engine.providers.anthropic_messages import Shape, build_params
from engine.providers.fake import SchemaFillingLLM
from engine.providers.schemas import StructuredMode
from engine.runner import run_debate
from engine.single import single_review
from tests.helpers import shipped_prompts

HAIKU = ModelSettings(provider="fake", model="haiku")
OPUS = ModelSettings(provider="fake", model="opus")
SHAPE = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort=None)


async def marks_by_role(spec: DebateSpec) -> dict[str, list[dict[str, Any]]]:
    """Each turn's Anthropic parameters, by `role` or `role:speaker`, in order."""
    llm = SchemaFillingLLM(seed=5)
    result = await run_debate(spec, resolve_llm=lambda _m: llm, prompts=shipped_prompts())
    assert result.status is DebateStatus.COMPLETE, result.error
    assert len(llm.calls) == len(result.transcript), "no re-asks"
    built: dict[str, list[dict[str, Any]]] = {}
    for turn, call in zip(result.transcript, llm.calls, strict=True):
        name = f"{turn.role.value}:{turn.speaker}" if turn.speaker else turn.role.value
        built.setdefault(name, []).append(build_params(call, SHAPE, prompt_caching=True))
    return built


def marked(params: dict[str, Any]) -> list[str]:
    """Where `params` carries `cache_control`: `system`, or the text of each marked block of the
    first message (its debate so far up to there)."""
    where = []
    system = params.get("system")
    if isinstance(system, list) and "cache_control" in system[-1]:
        where.append("system")
    content = params["messages"][0]["content"]
    if isinstance(content, list):
        where += [
            "".join(b["text"] for b in content[: n + 1])
            for n, block in enumerate(content)
            if "cache_control" in block
        ]
    return where


def spec(rounds: int) -> DebateSpec:
    """The default Anthropic split: debaters (framing included) and the judge on one model, the
    moderator on another."""
    return DebateSpec(
        question="Should we move the session store to Redis?",
        default_model=HAIKU,
        participants=[
            Participant(role=Role.MODERATOR, model=OPUS),
            Participant(role=Role.INDEPENDENT_JUDGE, name="judge-1", model=HAIKU),
        ],
        max_rounds=rounds,
        min_rounds=rounds,
        judges=1,
    )


async def test_a_one_round_debate_writes_nothing_no_later_call_reads() -> None:
    built = await marks_by_role(spec(1))
    (proposer,), (critic,), (rebuttal,) = built["proposer"], built["critic"], built["rebuttal"]
    (moderator,) = built["moderator"]

    # The moderator is the only call on its model: nothing it could write is ever read.
    assert json.dumps(moderator).count("cache_control") == 0
    # The critic extends the proposer's debate so far, the rebuttal the critic's.
    assert marked(proposer)[-1] != "system"
    assert marked(critic)[-1].startswith(marked(proposer)[-1])
    # The rebuttal is the round's last call on its model: it reads what the critic wrote and
    # writes nothing past it (the preamble it marks was written before, a read).
    assert marked(rebuttal) == ["system", marked(critic)[-1]]
    # The framing wrote the preamble for the later calls on its model.
    assert marked(built["framing"][0]) == ["system"]
    assert marked(built["independent_judge:judge-1"][0]) == ["system"]


async def test_a_debate_with_another_round_to_come_keeps_what_that_round_reads() -> None:
    built = await marks_by_role(spec(2))
    first, second = built["moderator"]
    # The second round's moderator reads the preamble the first one wrote.
    assert marked(first) == ["system"]
    assert marked(second) == ["system"]
    # No round's debate so far is read by the next (it becomes a record), so the round's last
    # call on the debaters' model still writes nothing past what it reads.
    assert all(len(marked(params)) == 2 for params in built["rebuttal"])


async def test_a_single_review_alone_writes_nothing_and_samples_of_it_are_cached() -> None:
    review = DebateSpec(question="Should we move the session store to Redis?", default_model=OPUS)
    alone, sampled = SchemaFillingLLM(seed=1), SchemaFillingLLM(seed=1)
    await single_review(review, resolve_llm=lambda _m: alone, prompts=shipped_prompts())
    for _ in range(2):
        await single_review(
            review, resolve_llm=lambda _m: sampled, prompts=shipped_prompts(), asked_again=True
        )
    (call,) = alone.calls
    assert "cache_control" not in json.dumps(build_params(call, SHAPE, prompt_caching=True))
    for call in sampled.calls:
        assert marked(build_params(call, SHAPE, prompt_caching=True)) == ["system"]
