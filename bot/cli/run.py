"""`debatebot run`: one debate from the terminal, queued and run in this process, printed as it
goes. Its spec comes from the same policy as Slack's (`bot.intake.policy`); with no channel, it
is queued without admission."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from bot.settings import Settings
from bot.store import queue
from bot.store.db import redacted, session_scope
from bot.store.tables import DebateSource
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import (
    DebateServices,
    build_services,
    build_worker,
    open_store,
)
from engine.models import (
    ContextDocument,
    DebateStatus,
)
from engine.protocols import definition_for, flagged

if TYPE_CHECKING:
    pass
from bot.cli.console import ConsoleEvents, print_verdict
from bot.cli.models import role_overrides

EXIT_CODES = {DebateStatus.COMPLETE: 0, DebateStatus.FAILED: 1, DebateStatus.TRUNCATED_BUDGET: 3}


def _read_context(paths: Sequence[str]) -> list[ContextDocument]:
    documents = []
    for name in paths:
        if name == "-":
            documents.append(ContextDocument(title="stdin", text=sys.stdin.read()))
            continue
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise SystemExit(f"debatebot: cannot read context file {name}: {error}") from None
        if not text.strip():
            raise SystemExit(f"debatebot: context file {name} is empty")
        documents.append(ContextDocument(title=path.name, text=text))
    return documents


async def run(args: argparse.Namespace) -> int:
    if args.route and not definition_for(args.protocol).flags.takes_route:
        routed = " or ".join(flagged(lambda flags: flags.takes_route))
        print(f"debatebot: --route works with --protocol {routed}", file=sys.stderr)
        return 2
    settings = Settings()
    services = build_services(settings)
    try:
        return await _run_debate(args, settings, services)
    finally:
        await services.aclose()


async def _run_debate(
    args: argparse.Namespace, settings: Settings, services: DebateServices
) -> int:
    try:
        spec = services.policy.spec(
            args.question,
            context=_read_context(args.context),
            protocol=args.protocol,
            rounds=args.rounds,
            budget_usd=args.budget,
            provider=args.provider,
            model=args.model,
            overrides=role_overrides(args),
            stances_for=args.stance_for,
            stances_against=args.stance_against,
            route=args.route,
            options=_options(args.option),
            judges=args.judges,
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        print(f"debatebot: invalid debate request: {problems}", file=sys.stderr)
        return 1
    for note in services.registry.check({p.role.value: p.model for p in spec.participants}):
        print(f"debatebot: warning: deprecated model: {note}", file=sys.stderr)
    with open_store(settings) as engine:
        console = ConsoleEvents(sys.stdout, sys.stderr)
        worker = build_worker(
            services,
            engine,
            worker_id=f"cli:{uuid.uuid4().hex[:8]}",
            sinks=lambda _debate: console,
        )
        # A debate from the terminal is the deployment's own workspace's: pending until a
        # single-workspace bot learns its id (bot.store.tenancy.adopt_pending).
        with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
            queued, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"cli:{uuid.uuid4()}", spec=spec, source=DebateSource.CLI
                ),
            )
        assert queued.id is not None
        claimed = await worker.claim_with_run(queued.id)
        if claimed is None:
            print(f"debatebot: debate {queued.id} was taken by another worker", file=sys.stderr)
            return 1
        debate, stored = claimed
        result = await worker.execute(debate, stored=stored)
    if result is None:
        print(f"debatebot: debate {queued.id} was taken over by another worker", file=sys.stderr)
        return 1
    print_verdict(result, sys.stdout)
    print(f"recorded as debate {queued.id} in {redacted(settings.database_url)}")
    if args.json:
        await asyncio.to_thread(
            Path(args.json).write_text, result.model_dump_json(indent=2), encoding="utf-8"
        )
        print(f"full record written to {args.json}")
    return EXIT_CODES[result.status]


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
