"""Tokens a one-round adversarial debate spends, against a single agent reviewing the same case
alone (`engine.single`), and how much of each role's prompt is cacheable. In one run.

- Tokens: input and output as the provider reports them (the local model counts real tokens;
  the fake provider estimates four characters a token). Goal: debate ÷ single ≤ 4. Also the
  tokens a prefix cache cannot serve (each call's prompt beyond what an earlier call sent).
- The floor: every debate call carries the rules and the case, which the single reviewer reads
  once; that alone, times the calls, ÷ the single review's tokens, is printed, since it bounds
  the ratio from below whatever the roles say.
- Cacheable share of a call: the longest prefix its prompt (the messages in order, as sent)
  shares with another call of the same debate, which a provider's prefix cache can serve once
  the first of them has run; per role, shared characters over prompt characters.
  Goal: ≥ 70 % for every role.
- Rounds (`--rounds 1 2 3`): a debate for each round count (the figures above are the first
  count's), then a table of tokens by count, beside the single review and the first count, in
  all tokens and in tokens a prefix cache cannot serve. The goal beside three rounds is the
  bill's (≤ 2.2x one round, with vendor prefix caching), which the tokens a cache cannot serve
  only approximate.

The case comes from examples/review_cases.jsonl (`--case` picks it by id); `--protocol` picks
the protocol (adversarial by default; the per-role goals are the adversarial debate's).

    .venv/bin/python -m benchmarks.tokens [--provider local|fake] [--case adr-001]
        [--protocol adversarial] [--rounds 1 2 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.ledger import LLMResolver
from engine.llm import LLM, Completion, LLMRequest
from engine.models import ContextDocument, DebateResult, DebateSpec, ModelSettings, Usage
from engine.pricing import Pricing

if TYPE_CHECKING:
    from bot.wiring import DebateServices

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "examples" / "review_cases.jsonl"
TOKEN_GOAL = 4.0
SHARE_GOAL = 0.70
ROUNDS_GOAL = 2.2


@dataclass
class Recorder:
    """Wraps each provider to keep every request it is sent, in order."""

    resolve: LLMResolver
    requests: list[LLMRequest] = field(default_factory=list)

    def __call__(self, model: ModelSettings) -> LLM:
        inner: LLM = self.resolve(model)
        recorder = self

        class Recording:
            provider = inner.provider

            def price_of(self, model: str) -> Pricing:
                return inner.price_of(model)

            async def complete(self, request: LLMRequest) -> Completion:
                recorder.requests.append(request)
                return await inner.complete(request)

        return Recording()


def prompt_text(request: LLMRequest) -> str:
    return "".join(f"<{m.role}>\n{m.content}\n" for m in request.messages)


def common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def uncached_input(requests: list[LLMRequest], input_tokens: list[int]) -> int:
    """Input tokens a prefix cache could not serve: each call's prompt beyond the longest prefix
    it shares with an *earlier* call, pro rata to its characters."""
    texts = [prompt_text(r) for r in requests]
    total = 0.0
    for index, text in enumerate(texts):
        seen = max((common_prefix(text, other) for other in texts[:index]), default=0)
        total += input_tokens[index] * (len(text) - seen) / len(text)
    return round(total)


def shared_floor(debate: list[LLMRequest], single_prompt: str, single: Usage) -> tuple[int, float]:
    """(tokens, ratio): the prefix every debate call shares with the single review's prompt
    (rules, question, documents), in tokens pro rata to the single prompt's characters, and
    what the debate's calls spend on it alone ÷ the single review's tokens."""
    shared = min(common_prefix(prompt_text(r), single_prompt) for r in debate)
    tokens = round(single.input_tokens * shared / len(single_prompt))
    return tokens, len(debate) * tokens / single.total_tokens


def shares(requests: list[LLMRequest], roles: list[str]) -> dict[str, tuple[int, int]]:
    """Per role: (cacheable characters, prompt characters)."""
    texts = [prompt_text(r) for r in requests]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for index, text in enumerate(texts):
        shared = max(
            (common_prefix(text, other) for j, other in enumerate(texts) if j != index),
            default=0,
        )
        totals[roles[index]][0] += shared
        totals[roles[index]][1] += len(text)
    return {role: (values[0], values[1]) for role, values in totals.items()}


def load_cases() -> list[dict[str, str]]:
    """The example cases, one JSON object a line."""
    lines = CASES.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line]


async def run_case(
    services: DebateServices,
    case: dict[str, str],
    *,
    protocol: str = "adversarial",
    rounds: int = 1,
) -> tuple[DebateSpec, Recorder, DebateResult]:
    """A debate of `case` over up to `rounds` rounds, every request it sent kept by the returned
    recorder. The adversarial moderator cannot end it sooner (`min_rounds`); consensus and panel
    still stop by their own rules. A stances debate gets one stance for and one against."""
    from engine.runner import run_debate

    context = [ContextDocument(title=case["title"], text=case["context"])]
    stances = (
        (["adopt it as written"], ["reject or revise it"]) if protocol == "stances" else ((), ())
    )
    spec = services.policy.spec(
        case["question"],
        context=context,
        protocol=protocol,
        rounds=rounds,
        stances_for=stances[0],
        stances_against=stances[1],
    )
    spec = spec.model_copy(update={"min_rounds": rounds})
    recorder = Recorder(services.resolve_llm)
    result = await run_debate(spec, resolve_llm=recorder, prompts=services.prompts)
    return spec, recorder, result


async def measure(provider: str, case: dict[str, str], protocol: str, rounds: list[int]) -> None:
    from bot.settings import Settings
    from bot.wiring import build_services
    from engine.single import single_review

    services = build_services(Settings(provider=provider))
    runs = [await run_case(services, case, protocol=protocol, rounds=n) for n in rounds]
    spec, recorder, result = runs[0]
    debate_requests = list(recorder.requests)
    roles = [turn.role.value for turn in result.transcript]
    _, single_turn = await single_review(spec, resolve_llm=recorder, prompts=services.prompts)

    debate = sum((turn.usage for turn in result.transcript), Usage())
    single = single_turn.usage
    calls = sum(1 + turn.reasks for turn in result.transcript)
    print(
        f"case {case['id']} on {provider}: {rounds[0]}-round {protocol} debate"
        f" {result.status.value}, {calls} calls"
    )
    print(f"{'':<10} {'input':>7} {'output':>7} {'total':>7}")
    for name, usage in (("debate", debate), ("single", single)):
        print(
            f"{name:<10} {usage.input_tokens:>7} {usage.output_tokens:>7} {usage.total_tokens:>7}"
        )
    print(
        f"input {debate.input_tokens / single.input_tokens:.2f}x, output"
        f" {debate.output_tokens / single.output_tokens:.2f}x"
    )
    goal = f"goal ≤ {TOKEN_GOAL:g}, " if (protocol, rounds[0]) == ("adversarial", 1) else ""
    print(
        f"tokens, {rounds[0]}-round debate ÷ single answer: {goal}measured"
        f" {debate.total_tokens / single.total_tokens:.2f}"
    )
    floor = shared_floor(debate_requests, prompt_text(recorder.requests[-1]), single)
    print(
        f"floor of the ratio: {len(debate_requests)} calls each carrying the rules and the case"
        f" the single reviewer reads once (~{floor[0]:,} tokens) come to {floor[1]:.2f}x before"
        " any role's instructions, argument or answer"
    )
    fresh = uncached_input(debate_requests, [t.usage.input_tokens for t in result.transcript])
    print(
        f"tokens a prompt cache cannot serve (uncached input + output): debate"
        f" {fresh + debate.output_tokens}, single {single.total_tokens}:"
        f" {(fresh + debate.output_tokens) / single.total_tokens:.2f}x"
    )
    per_role = shares(debate_requests, roles)
    overall = [sum(v[0] for v in per_role.values()), sum(v[1] for v in per_role.values())]
    for role, (shared, total) in per_role.items():
        print(
            f"cacheable share, {role:<9}: goal ≥ {SHARE_GOAL:.0%}, measured {shared / total:.1%}"
            f" ({shared:,} of {total:,} characters)"
        )
    print(f"cacheable share, all roles: {overall[0] / overall[1]:.1%}")
    if len(runs) > 1:
        print_rounds(rounds, runs, single)


def print_rounds(
    rounds: list[int], runs: list[tuple[DebateSpec, Recorder, DebateResult]], single: Usage
) -> None:
    """Tokens by round count, beside the single review and the first count in the list; the
    goal is the bill's (three rounds ≤ 2.2x one round, under vendor prefix caching), which
    tokens a prefix cache cannot serve approximate."""
    print(
        f"{'rounds':>6} {'ran':>4} {'calls':>5} {'total':>7} {'÷single':>8} {'uncached':>9}"
        f" {'÷first':>7}"
    )
    first: tuple[int, int] | None = None
    for asked, (_, recorder, result) in zip(rounds, runs, strict=True):
        usage = sum((turn.usage for turn in result.transcript), Usage())
        # The first run's recorder also holds the single review, sent after the debate.
        requests = recorder.requests[: len(result.transcript)]
        fresh = usage.output_tokens + uncached_input(
            requests, [t.usage.input_tokens for t in result.transcript]
        )
        first = first or (usage.total_tokens, fresh)
        ran = max((turn.round for turn in result.transcript), default=0)
        goal = f" (goal for the bill ≤ {ROUNDS_GOAL:g})" if asked == 3 and rounds[0] == 1 else ""
        print(
            f"{asked:>6} {ran:>4} {len(requests):>5} {usage.total_tokens:>7}"
            f" {usage.total_tokens / single.total_tokens:>7.2f}x {fresh:>9}"
            f" {fresh / first[1]:>6.2f}x{goal}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=["local", "fake"], default="local")
    parser.add_argument("--case", default="adr-001")
    parser.add_argument(
        "--protocol",
        choices=["adversarial", "stances", "consensus", "structured", "panel"],
        default="adversarial",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        nargs="+",
        default=[1],
        help="round counts to run, each forced to run all its rounds (e.g. --rounds 1 2 3)",
    )
    args = parser.parse_args()
    os.environ.pop("DEBATEBOT_PROVIDER", None)
    chosen = [c for c in load_cases() if c["id"] == args.case]
    if not chosen:
        raise SystemExit(f"no case {args.case!r} in {CASES}")
    asyncio.run(measure(args.provider, chosen[0], args.protocol, args.rounds))


if __name__ == "__main__":
    main()
