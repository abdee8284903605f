"""`debatebot eval`: the arms on the cases (see `bot.cli.eval_runner`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot.settings import Settings
from bot.wiring import (
    build_services,
)
from engine.models import (
    DEFAULT_PROTOCOL,
    ContextDocument,
    DebateSpec,
    Usage,
)
from engine.protocols import PROTOCOLS

if TYPE_CHECKING:
    pass
from bot.cli.models import role_overrides

EVAL_STANCES = (["adopt it as proposed"], ["do not adopt it as proposed"])
"""The two sides of a protocol that takes stances, in an eval, where no one names them."""


async def evaluate(args: argparse.Namespace) -> int:
    """`debatebot eval`: see bot.cli.eval_runner."""
    from bot.cli import eval_runner
    from engine.evaluation.arms import ArmRunner
    from engine.evaluation.cases import load_cases

    settings = Settings()
    services = build_services(settings)
    cases = load_cases(Path(args.cases))[: args.limit]
    plan = eval_runner.EvalPlan(
        cases=cases,
        arms=args.arms,
        out=Path(args.out),
        concurrency=args.concurrency,
        controls=not args.no_controls,
        vote_k=args.vote_k,
        max_cost_usd=args.max_cost,
        calibration_target=settings.calibration_target,
    )
    overrides = role_overrides(args)
    models = services.policy.models(args.provider, args.model, overrides)
    for note in services.registry.check(models):
        print(f"debatebot: warning: deprecated model: {note}", file=sys.stderr)

    def spec_for(question: str, documents: list[ContextDocument], protocol: str) -> DebateSpec:
        # The single-model arms build their spec as a default debate's (its models, its budget).
        found = PROTOCOLS.get(protocol)
        stances = found is not None and found.flags.takes_stances
        return services.policy.spec(
            question,
            context=documents,
            protocol=protocol if found is not None else DEFAULT_PROTOCOL,
            provider=args.provider,
            model=args.model,
            overrides=overrides,
            stances_for=EVAL_STANCES[0] if stances else (),
            stances_against=EVAL_STANCES[1] if stances else (),
        )

    def price(tokens_in: int, tokens_out: int) -> float:
        """At the dearest of the roles' models, so the estimate errs high."""
        return max(
            services.registry.pricing(m.provider, m.model).cost(
                Usage(input_tokens=tokens_in, output_tokens=tokens_out)
            )
            for m in models.values()
        )

    run = eval_runner.EvalRun(
        plan=plan,
        runner=ArmRunner(
            resolve_llm=services.resolve_llm,
            prompts=services.prompts,
            spec_for=spec_for,
            run_id=eval_runner.new_run_id(),
        ),
        price=price,
    )
    label = ", ".join(sorted({f"{m.provider}:{m.model}" for m in models.values()}))
    done = run.done()
    guess = eval_runner.estimate(plan, done, price)
    print(
        f"eval: {len(cases)} case(s) x {len(plan.arms)} arm(s) on {label}; {len(done)} run(s)"
        f" already in {plan.out}, {guess.runs} to go: about {guess.calls} model calls,"
        f" {guess.input_tokens + guess.output_tokens:,} tokens, ${guess.cost_usd:.2f} (estimate)",
        file=sys.stderr,
    )
    hosted = {m.provider for m in models.values()} & {"openai", "anthropic"}
    if (hosted or guess.cost_usd > 0) and not args.yes and guess.runs:
        print(
            f"debatebot: this eval spends money on {', '.join(sorted(hosted)) or 'a priced model'}"
            " (estimate above); run it again with --yes to go ahead, and --max-cost USD to cap it",
            file=sys.stderr,
        )
        return 2
    if args.max_cost is not None and guess.cost_usd > args.max_cost:
        print(
            f"note: the estimate passes --max-cost {args.max_cost:g}; the eval stops before the"
            " run that would pass it",
            file=sys.stderr,
        )
    progress = eval_runner.Progress.of(plan, done)
    try:
        results = await run.run(progress)
    finally:
        progress.close()
        await services.aclose()
    written = eval_runner.write_report(results, plan, label, run.stopped)
    if run.stopped:
        print(f"eval {run.stopped}", file=sys.stderr)
    failed = [r for r in results if not r.ok]
    for result in failed:
        print(
            f"failed: {result.case_id}/{result.arm} ({result.variant}): {result.error}",
            file=sys.stderr,
        )
    print("\n".join(str(path) for path in written))
    return 3 if run.stopped else 0
