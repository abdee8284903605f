"""Scripted debate replies for tests: one queue per role, dispatched on the requested schema."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.llm import LLMRequest
from engine.models import Usage
from engine.pricing import FREE, Pricing
from engine.prompts import PromptLibrary
from engine.providers.fake import CANNED_DEBATE_REPLIES, FunctionLLM

REPO_ROOT = Path(__file__).resolve().parents[1]
REVIEW_CASES = REPO_ROOT / "examples" / "review_cases.jsonl"
"""The project's own copy of the decision cases (planted flaws and clean controls)."""

LLAMA_GROUP = "llama"
"""The xdist group of every test that runs SmolLM2: one worker runs them one after another."""


def local_threads() -> int:
    """llama.cpp threads for a test: every core alone, one when pytest-xdist runs other tests
    beside it (llama.cpp's threads spin while they wait, so sharing cores slows both sides)."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        return 1
    return max(1, len(os.sched_getaffinity(0)))


SCHEMA_BY_ROLE = {
    "framing": "Proposition",
    "proposer": "ProposerTurn",
    "critic": "CriticTurn",
    "rebuttal": "RebuttalTurn",
    "moderator": "ModeratorTurn",
    "independent_judge": "IndependentJudgment",
}

CANNED_JUDGMENT = {
    "reasoning": "[fake] The fallback can be added as a condition of adopting it.",
    "decision": "accept_with_conditions",
}
"""The independent judge of the canned debate: it reads "revise the proposal to add a fallback,
then adopt it" as adopting with a condition, so it does not reach the canned moderator's
`revise` and the canned debate stays doubtful (its review request is what most tests drive).
`judge_says` makes one that reaches a given decision."""


def judge_says(decision: str) -> dict[str, Any]:
    """An independent judge's reply reaching `decision`."""
    return {**CANNED_JUDGMENT, "decision": decision}


RoleReply = dict[str, Any] | str | Exception | Callable[[LLMRequest], Any]


def reply_for(role: str, **changes: Any) -> dict[str, Any]:
    """The canned reply of `role` with some fields replaced."""
    canned = CANNED_JUDGMENT if role == "independent_judge" else None
    reply = copy.deepcopy(canned or CANNED_DEBATE_REPLIES[SCHEMA_BY_ROLE[role]])
    reply.update(changes)
    return reply


class DebateScript:
    """Per-role reply queues; a role's last reply repeats once its queue is down to one."""

    def __init__(self, **queues: list[RoleReply]) -> None:
        unknown = set(queues) - set(SCHEMA_BY_ROLE)
        assert not unknown, f"unknown roles {unknown}"
        self.queues = {role: list(queues.get(role, [reply_for(role)])) for role in SCHEMA_BY_ROLE}
        self.role_of_schema = {schema: role for role, schema in SCHEMA_BY_ROLE.items()}

    def __call__(self, request: LLMRequest) -> Any:
        role = self.role_of_schema[request.schema_name or ""]
        queue = self.queues[role]
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        return reply(request) if callable(reply) else reply

    def llm(self, *, pricing: Pricing = FREE, usage: Usage | None = None) -> FunctionLLM:
        return FunctionLLM(self, pricing=pricing, usage=usage)


def calls_for(llm: FunctionLLM, role: str) -> list[LLMRequest]:
    return [call for call in llm.calls if call.schema_name == SCHEMA_BY_ROLE[role]]


_PROMPTS: PromptLibrary | None = None


def shipped_prompts() -> PromptLibrary:
    """The shipped, verified prompts, loaded once per test session."""
    global _PROMPTS
    if _PROMPTS is None:
        _PROMPTS = PromptLibrary.load()
    return _PROMPTS
