"""`debatebot run`: one debate from the terminal, queued and run in this process, printed as it
goes. It is admitted by the same intake as every front door's request (`bot.intake`: the spec
by policy and checked, debates in flight, monthly caps) before anything is stored. `--json`
writes the debate's export, as `debatebot export` does."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from bot.cli.console import ConsoleEvents, print_verdict
from bot.cli.interrupt import EXIT_AT_ONCE, CtrlC
from bot.cli.models import role_overrides
from bot.cli.question import QuestionError, read_context, read_question
from bot.intake.deployment import deployment_intake
from bot.intake.errors import NotAdmittedError
from bot.intake.request import Ask, DebateRequest, Origin, OriginKind
from bot.settings import Settings
from bot.store.db import redacted, session_scope
from bot.store.debate_tables import DebateSource
from bot.store.export import export_record
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import (
    DebateServices,
    build_services,
    build_worker,
    open_store,
)
from engine.models import (
    ContextDocument,
    DebateSpec,
    DebateStatus,
)
from engine.protocols import definition_for, flagged

EXIT_CODES = {
    DebateStatus.COMPLETE: 0,
    DebateStatus.FAILED: 1,
    DebateStatus.TRUNCATED_BUDGET: 3,
    DebateStatus.CANCELLED: EXIT_AT_ONCE,
}


async def run(args: argparse.Namespace) -> int:
    if args.route and not definition_for(args.protocol).flags.takes_route:
        routed = " or ".join(flagged(lambda flags: flags.takes_route))
        print(f"debatebot: --route works with --protocol {routed}", file=sys.stderr)
        return 2
    try:
        question = read_question(args)
    except QuestionError as error:
        print(f"debatebot: {error}", file=sys.stderr)
        return 2
    try:
        context = read_context(args.context)
    except QuestionError as error:  # a document that cannot be read is bad input, not usage
        print(f"debatebot: {error}", file=sys.stderr)
        return 1
    settings = Settings()
    services = build_services(settings)
    try:
        return await _run_debate(args, question, context, settings, services)
    finally:
        await services.aclose()


async def _run_debate(
    args: argparse.Namespace,
    question: str,
    context: list[ContextDocument],
    settings: Settings,
    services: DebateServices,
) -> int:
    options = _options(args.option)
    ask = Ask(
        question=question,
        context=tuple(context),
        protocol=args.protocol,
        rounds=args.rounds,
        budget_usd=args.budget,
        provider=args.provider,
        model=args.model,
        overrides=role_overrides(args),
        stances_for=tuple(args.stance_for),
        stances_against=tuple(args.stance_against),
        route=args.route,
        options=options,
        judges=args.judges,
    )
    with open_store(settings) as engine:
        # A debate from the terminal is the deployment's own workspace's: pending until a
        # single-workspace bot learns its id (bot.store.tenancy.adopt_pending). It is admitted
        # as every front door's request is (the spec checked, debates in flight, monthly caps)
        # before anything is stored.
        intake = deployment_intake(settings, services.policy, engine, workspace=PENDING_WORKSPACE)
        request = DebateRequest(
            trigger_key=f"cli:{uuid.uuid4()}",
            source=DebateSource.CLI,
            asked=ask,
            origin=Origin(OriginKind.TERMINAL),
        )
        try:
            admitted = await intake.admit(request)
        except NotAdmittedError as error:
            print(f"debatebot: {error}", file=sys.stderr)
            return 1
        spec = admitted.spec
        for note in services.registry.check({p.role.value: p.model for p in spec.participants}):
            print(f"debatebot: warning: deprecated model: {note}", file=sys.stderr)
        console = ConsoleEvents(sys.stdout, sys.stderr)
        worker = build_worker(
            services,
            engine,
            worker_id=f"cli:{uuid.uuid4().hex[:8]}",
            sinks=lambda _debate: console,
        )
        try:
            queued = (await intake.enqueue(admitted)).debate
        except NotAdmittedError as error:
            print(f"debatebot: {error}", file=sys.stderr)
            return 1
        assert queued.id is not None
        debate_id = queued.id
        claimed = await worker.claim_with_run(debate_id)
        if claimed is None:
            print(f"debatebot: debate {debate_id} was taken by another worker", file=sys.stderr)
            return 1
        debate, stored = claimed
        # Ctrl-C from here on stops the debate and still prints what it holds (bot.cli.interrupt).
        with CtrlC(engine, debate_id=debate_id, workspace=PENDING_WORKSPACE):
            result = await worker.execute(debate, stored=stored)
        if result is None:
            print(
                f"debatebot: debate {debate_id} was taken over by another worker", file=sys.stderr
            )
            return 1
        print_verdict(result, sys.stdout)
        embedded = embedded_model_note(settings, spec)
        if embedded is not None:
            print(embedded)
        print(f"recorded as debate {debate_id} in {redacted(settings.database_url)}")
        if args.json:
            with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
                record = export_record(session, debate_id=debate_id, key=settings.audit_key_bytes())
            text = json.dumps(record, indent=2, ensure_ascii=False)
            await asyncio.to_thread(Path(args.json).write_text, text, encoding="utf-8")
            print(
                f"full record written to {args.json} (as `debatebot export {debate_id}` writes"
                f" it; `debatebot audit verify-export {args.json}` checks it)"
            )
    return EXIT_CODES[result.status]


def embedded_model_note(settings: Settings, spec: DebateSpec) -> str | None:
    """What the person should know when the embedded model answered: it is tiny, so only the
    mechanics are real, and which settings choose a hosted model (a key alone does not: the
    provider stays local until DEBATEBOT_PROVIDER or --provider names another)."""
    embedded = settings.local_model_path is None
    if not embedded or all(p.model.provider != "local" for p in spec.participants):
        return None
    return (
        "note: the embedded model is SmolLM2-135M, a 135M-parameter model: the mechanics are"
        " real, the text is not meaningful. For real debates use a hosted model:"
        " DEBATEBOT_PROVIDER=anthropic with DEBATEBOT_ANTHROPIC_API_KEY (or openai with"
        " DEBATEBOT_OPENAI_API_KEY), or --provider; see docs/providers.md"
    )


def _options(pairs: Sequence[str]) -> dict[str, object]:
    """`key=value` protocol options; values are JSON when they parse as JSON, else text."""
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"debatebot: --option takes key=value, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options
