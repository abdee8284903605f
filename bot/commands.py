"""What each `debatebot` subcommand does; `bot.cli` parses the command line and imports this
module only once a command is chosen, so `debatebot --help` loads no database or model code.

`run` exit codes: 0 debate complete, 1 debate failed or bad input, 2 usage error, 3 cut short by
the budget ceiling. Other commands: 0 success, 1 failure (with the reason on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pydantic import ValidationError

from bot.app import (
    DebateServices,
    build_delivery,
    build_jobs,
    build_notifier,
    build_services,
    build_worker,
    check_configured_models,
    open_store,
    serve,
    serve_metrics,
    startup_heap_frozen,
)
from bot.logs import configure_logging
from bot.metrics import Metrics
from bot.providers import KEY_VARIABLES
from bot.settings import ROLE_SLOTS, RoleModel, Settings, SettingsError
from bot.store import operations, repository
from bot.store import slack as slack_store
from bot.store.audit import ChainReport
from bot.store.db import redacted, session_scope, upgrade
from bot.store.export import export_record, render_markdown, verify_export
from bot.store.tables import DebateSource
from engine.catalog import Lifecycle, ModelRetiredError, lifecycle_notes
from engine.errors import EngineError
from engine.events import DebateEvent, TurnFinished, TurnStarted
from engine.models import (
    ADVERSARIAL_ROLES,
    ContextDocument,
    CriticTurn,
    DebateResult,
    DebateSpec,
    DebateStatus,
    ModeratorTurn,
    ProposerTurn,
    Proposition,
    RebuttalTurn,
    Role,
    TurnRecord,
    Usage,
    utcnow,
)
from engine.prompts import PromptLibrary, default_prompt_dir, write_lock

if TYPE_CHECKING:
    from sqlmodel import Session

EXIT_CODES = {DebateStatus.COMPLETE: 0, DebateStatus.FAILED: 1, DebateStatus.TRUNCATED_BUDGET: 3}
SPINNER = "|/-\\"


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_turn(turn: TurnRecord) -> list[str]:
    """A few readable lines about one turn, for the terminal."""
    if turn.role not in ADVERSARIAL_ROLES:
        return [
            f"{key}: {_clip(value if isinstance(value, str) else json.dumps(value))}"
            for key, value in list(turn.parsed.items())[:4]
        ]
    if turn.role is Role.FRAMING:
        p = Proposition.model_validate(turn.parsed)
        return [f"thesis: {_clip(p.thesis)}", f"criteria: {_clip('; '.join(p.criteria))}"]
    if turn.role is Role.PROPOSER:
        pr = ProposerTurn.model_validate(turn.parsed)
        lines = [f"thesis: {_clip(pr.thesis)}"]
        return lines + [f"+ {_clip(arg)}" for arg in pr.supporting_arguments[:3]]
    if turn.role is Role.CRITIC:
        c = CriticTurn.model_validate(turn.parsed)
        lines = [f"thesis: {_clip(c.thesis)}", f"challenge strength: {c.challenge_strength}/10"]
        return lines + [f"- {_clip(arg)}" for arg in c.counter_arguments[:3]]
    if turn.role is Role.REBUTTAL:
        r = RebuttalTurn.model_validate(turn.parsed)
        lines = [f"thesis: {_clip(r.thesis)}"]
        return lines + [f"concedes: {_clip(c)}" for c in r.concessions[:2]]
    m = ModeratorTurn.model_validate(turn.parsed)
    return [
        f"decision: {m.decision.value} ({m.confidence_level.value})",
        f"argument quality: proposer {m.proposer_quality.mean:.1f}/10,"
        f" critic {m.critic_quality.mean:.1f}/10",
        f"synthesis: {_clip(m.synthesis, 300)}",
        f"another round recommended: {'yes' if m.recommend_another_round else 'no'}",
    ]


class ConsoleEvents:
    """Prints each turn as it finishes, with a spinner on a terminal while a model generates."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.started = time.perf_counter()
        self._spinner: asyncio.Task[None] | None = None

    async def _spin(self, label: str) -> None:
        began = time.perf_counter()
        for frame in iter(int, 1):
            elapsed = time.perf_counter() - began
            self.err.write(f"\r{SPINNER[frame % 4]} {label} {elapsed:5.1f}s")
            self.err.flush()
            await asyncio.sleep(0.2)

    async def _stop_spinner(self) -> None:
        if self._spinner is None:
            return
        self._spinner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._spinner
        self._spinner = None
        self.err.write("\r\033[K")
        self.err.flush()

    async def __call__(self, event: DebateEvent) -> None:
        if isinstance(event, TurnStarted):
            label = (
                f"{event.role.value} (round {event.round}, attempt {event.attempt})"
                f" generating on {event.provider}:{event.model}"
            )
            if self.err.isatty():
                self._spinner = asyncio.create_task(self._spin(label))
            else:
                self.err.write(f"… {label}\n")
        elif isinstance(event, TurnFinished):
            await self._stop_spinner()
            turn = event.turn
            attempt = f" attempt {turn.attempt}" if turn.attempt > 1 else ""
            source = " [replayed]" if event.replayed else ""
            self.out.write(
                f"\n[round {turn.round}] {turn.role.value}{attempt}{source} ·"
                f" {turn.usage.input_tokens:,} in / {turn.usage.output_tokens:,} out tokens ·"
                f" {turn.latency_s:.1f}s · elapsed {time.perf_counter() - self.started:.1f}s\n"
            )
            for line in summarize_turn(turn):
                self.out.write(f"    {line}\n")
        else:
            await self._stop_spinner()
        self.out.flush()


def print_verdict(result: DebateResult, out: TextIO) -> None:
    v = result.verdict
    usage = result.usage
    out.write("\n" + "=" * 72 + "\n")
    out.write(f"STATUS      {v.status.value}\n")
    out.write(f"DECISION    {v.decision.value}\n")
    out.write(f"CONFIDENCE  {v.confidence:.2f} ({v.level.value})\n")
    for step in v.confidence_method:
        out.write(f"              {step.delta:+.2f}  {step.reason}\n")
    out.write(f"SYNTHESIS   {v.synthesis}\n")
    if v.unresolved_points:
        out.write("UNRESOLVED\n" + "".join(f"  - {p}\n" for p in v.unresolved_points))
    if v.uncertainties:
        out.write("UNCERTAIN\n" + "".join(f"  - {p}\n" for p in v.uncertainties))
    if result.flags:
        out.write(f"FLAGS       {', '.join(f.value for f in result.flags)}\n")
    fabricated = [c for c in result.citations if not c.verified]
    if fabricated:
        out.write("UNVERIFIED CITATIONS\n")
        out.write("".join(f"  - {c.role.value} r{c.round}: {_clip(c.quote)}\n" for c in fabricated))
    if v.escalate:
        out.write("ESCALATE    " + "; ".join(v.escalation_reasons) + "\n")
    report = result.report or {}
    if "lines" in report:
        out.write("REPORT\n" + "".join(f"  {line}\n" for line in report["lines"]))
    for key in ("winner", "side_totals", "routing", "aggregation_fallback", "warnings"):
        if report.get(key):
            out.write(f"{key.upper():<12}{report[key]}\n")
    if result.error:
        out.write(f"ERROR       {result.error}\n")
    seconds = (result.finished_at - result.started_at).total_seconds()
    out.write(
        f"COST        ${result.cost_usd:.4f} · {usage.input_tokens:,} in /"
        f" {usage.output_tokens:,} out tokens · {len(result.transcript)} turns · {seconds:.1f}s\n"
    )
    out.flush()


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


async def _run(args: argparse.Namespace) -> int:
    if args.route and args.protocol != "panel":
        print("debatebot: --route works with --protocol panel", file=sys.stderr)
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
        spec = services.new_spec(
            args.question,
            context=_read_context(args.context),
            protocol=args.protocol,
            rounds=args.rounds,
            budget_usd=args.budget,
            provider=args.provider,
            model=args.model,
            overrides=_role_overrides(args),
            stances_for=args.stance_for,
            stances_against=args.stance_against,
            route=args.route,
            options=_options(args.option),
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
        with session_scope(engine) as session:
            queued, _ = repository.enqueue_debate(
                session, trigger_key=f"cli:{uuid.uuid4()}", spec=spec, source=DebateSource.CLI
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


def _role_overrides(args: argparse.Namespace) -> dict[str, RoleModel]:
    return {
        role: RoleModel.parse(value)
        for role in ROLE_SLOTS
        if (value := getattr(args, f"role_{role}", None))
    }


def _models(args: argparse.Namespace) -> int:
    """Print every role's model with its lifecycle status, price and whether its provider's
    key is present, a warning per deprecated model, then the catalogue's current models of
    each hosted provider in use. Exit 1 when a key is missing or a model is retired."""
    settings = Settings()
    services = build_services(settings)
    models = services.models(args.provider, args.model, _role_overrides(args))
    registry = services.registry
    catalog = registry.catalog
    today = registry.today()
    print(
        f"{'role':<10} {'provider:model':<40} {'status':<28} {'effort':<7} {'max tok':>7}"
        "  price in/out USD/MTok"
    )
    unpriced = False
    for role, chosen in models.items():
        try:
            price = registry.pricing(chosen.provider, chosen.model)
            priced = f"{price.input_per_mtok:g} / {price.output_per_mtok:g}"
        except EngineError:
            priced, unpriced = "NO PRICE (add to DEBATEBOT_PRICES)", True
        entry = catalog.find(chosen.provider, chosen.model)
        if entry is not None:
            status = entry.status(today)
        elif chosen.provider in ("openai", "anthropic"):
            status = "not in the catalogue"
        else:
            status = "runs here" if chosen.provider in ("local", "fake") else "your server's"
        name = f"{chosen.provider}:{chosen.model}"
        print(
            f"{role:<10} {name:<40} {status:<28} {chosen.effort or '-':<7}"
            f" {chosen.max_tokens:>7}  {priced}"
        )
    print()
    failed = unpriced
    try:
        for note in lifecycle_notes(catalog, models, today=today).values():
            print(f"warning: {note}")
    except ModelRetiredError as error:
        failed = True
        print(f"RETIRED: {error}")
    for provider in dict.fromkeys(m.provider for m in models.values()):
        variable = KEY_VARIABLES.get(provider)
        if provider == "openai-compatible":
            state = f"base URL {settings.openai_compatible_base_url or 'NOT SET'}"
        elif variable is None:
            state = "no key needed"
        else:
            try:
                settings.provider_key(provider)
                state = f"key present ({variable})"
            except SettingsError as error:
                failed = True
                state = f"KEY MISSING: {error}"
        print(f"{provider:<18} {state}")
    for provider in dict.fromkeys(m.provider for m in models.values()):
        current = [e for e in catalog.of(provider) if e.lifecycle(today) is Lifecycle.CURRENT]
        if not current:
            continue
        print(f"\ncurrent {provider} models (catalogue; USD per million tokens in / out):")
        for entry in current:
            roles = f"  default for {', '.join(entry.default_roles)}" if entry.default_roles else ""
            price = entry.prices
            prices = f"{price.input_per_mtok:g} / {price.output_per_mtok:g}"
            print(
                f"  {entry.id:<22} {prices:<12} released {entry.released or '?'},"
                f" checked {entry.checked}{roles}"
            )
    return 1 if failed else 0


async def _worker(args: argparse.Namespace) -> int:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    settings = Settings()
    configure_logging(settings)
    services = build_services(settings)
    check_configured_models(services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    concurrency = args.concurrency or settings.worker_concurrency
    if concurrency < 1:
        raise SettingsError(
            "DEBATEBOT_WORKER_CONCURRENCY=0 runs no debates (it is for a serve that leaves them"
            " to workers); a worker needs at least 1: set it, or pass --concurrency"
        )
    print(
        f"worker {args.name}: up to {concurrency} debate(s) at once on"
        f" {redacted(settings.database_url)}",
        file=sys.stderr,
    )
    metrics = Metrics()
    metrics_port = args.metrics_port or settings.metrics_port
    exporter = serve_metrics(metrics, settings.http_host, metrics_port) if metrics_port else None
    with open_store(settings) as engine, contextlib.ExitStack() as frozen:
        delivery = (
            build_delivery(settings, engine, metrics=metrics) if settings.slack_bot_token else None
        )
        notifier = build_notifier(
            settings, engine, wake=delivery.wake if delivery else (lambda: None)
        )
        worker = build_worker(
            services, engine, worker_id=args.name, reporter=notifier, metrics=metrics
        )
        scheduler = None
        if not args.exit_when_idle:
            scheduler = AsyncIOScheduler(timezone="UTC")
            poster = delivery.poster if delivery is not None else None
            jobs = build_jobs(
                settings,
                engine,
                notifier,
                runner=args.name,
                poster=poster,
                metrics=metrics,
                hosts=services.hosts,
            )
            jobs.schedule(scheduler)
            scheduler.start()
        frozen.enter_context(startup_heap_frozen())
        workers = [
            asyncio.create_task(
                worker.run_pool(stop, concurrency=concurrency, exit_when_idle=args.exit_when_idle)
            )
        ]
        delivering = (
            asyncio.create_task(delivery.run_forever(stop)) if delivery is not None else None
        )
        stopping: asyncio.Future[object] = asyncio.ensure_future(stop.wait())
        all_done: asyncio.Future[object] = asyncio.ensure_future(
            asyncio.gather(*workers, return_exceptions=True)
        )
        await asyncio.wait([stopping, all_done], return_when=asyncio.FIRST_COMPLETED)
        if args.exit_when_idle and delivery is not None:
            await delivery.drain()
        stop.set()
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        _, running = await asyncio.wait(workers, timeout=settings.shutdown_grace_s)
        for task in running:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if delivering is not None:
            await asyncio.gather(delivering, return_exceptions=True)
        stopping.cancel()
    if exporter is not None:
        exporter.shutdown()
    await services.aclose()
    return 0


async def _serve(args: argparse.Namespace) -> int:
    settings = Settings()
    settings.slack_secrets()
    configure_logging(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    mode = (
        "Socket Mode"
        if settings.slack_app_token is not None
        else (f"HTTP on {settings.http_host}:{settings.http_port} (/slack/events, /healthz)")
    )
    print(
        f"debatebot serving over {mode}; up to {settings.worker_concurrency} debate(s) at once on"
        f" {redacted(settings.database_url)}",
        file=sys.stderr,
    )
    await serve(settings, stop)
    return 0


EVAL_STANCES = (["adopt it as proposed"], ["do not adopt it as proposed"])
"""The stances protocol's two sides in an eval, where no one names them."""


async def _eval(args: argparse.Namespace) -> int:
    """`debatebot eval`: see bot.evaluation."""
    from bot import evaluation
    from engine.evaluation.arms import ArmRunner
    from engine.evaluation.cases import load_cases

    settings = Settings()
    services = build_services(settings)
    cases = load_cases(Path(args.cases))[: args.limit]
    plan = evaluation.EvalPlan(
        cases=cases,
        arms=args.arms,
        out=Path(args.out),
        concurrency=args.concurrency,
        controls=not args.no_controls,
        vote_k=args.vote_k,
        max_cost_usd=args.max_cost,
    )
    overrides = _role_overrides(args)
    models = services.models(args.provider, args.model, overrides)
    for note in services.registry.check(models):
        print(f"debatebot: warning: deprecated model: {note}", file=sys.stderr)

    def spec_for(question: str, documents: list[ContextDocument], protocol: str) -> DebateSpec:
        stances = protocol == "stances"
        return services.new_spec(
            question,
            context=documents,
            protocol="adversarial" if protocol == "single" else protocol,
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

    run = evaluation.EvalRun(
        plan=plan,
        runner=ArmRunner(
            resolve_llm=services.resolve_llm,
            prompts=services.prompts,
            spec_for=spec_for,
            run_id=evaluation.new_run_id(),
        ),
        price=price,
    )
    label = ", ".join(sorted({f"{m.provider}:{m.model}" for m in models.values()}))
    done = run.done()
    guess = evaluation.estimate(plan, done, price)
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
    progress = evaluation.Progress.of(plan, done)
    try:
        results = await run.run(progress)
    finally:
        progress.close()
        await services.aclose()
    written = evaluation.write_report(results, plan, label, run.stopped)
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


def _db(args: argparse.Namespace) -> int:
    settings = Settings()
    revision = upgrade(settings.database_url)
    print(f"database {redacted(settings.database_url)} is at schema {revision}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    settings = Settings()
    key = settings.audit_key_bytes()
    if args.action == "verify-export":
        if args.target is None:
            print("debatebot: audit verify-export takes an export file", file=sys.stderr)
            return 2
        try:
            record = json.loads(Path(args.target).read_text(encoding="utf-8"))
            report = verify_export(record, key=key)
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"debatebot: cannot read {args.target} as an export: {error}", file=sys.stderr)
            return 1
        return print_audit(report)
    debate_id: int | None = None
    if args.target is not None:
        try:
            debate_id = int(args.target)
        except ValueError:
            print(
                f"debatebot: audit {args.action} takes a debate id; got {args.target!r}",
                file=sys.stderr,
            )
            return 2
    if args.action == "sign" and key is None:
        print(
            "debatebot: audit sign needs DEBATEBOT_AUDIT_KEY, the key the bot signs seals with",
            file=sys.stderr,
        )
        return 2
    with open_store(settings) as engine, session_scope(engine) as session:
        if args.action == "sign":
            assert key is not None
            return _sign(session, debate_id, key)
        if debate_id is not None:
            return print_audit(repository.verify_chain(session, debate_id=debate_id, key=key))
        ids = repository.debate_ids(session)
        failed = [
            report
            for report in (repository.verify_chain(session, debate_id=i, key=key) for i in ids)
            if print_audit(report)
        ]
    if failed:
        named = ", ".join(f"debate {report.debate_id} ({report.kind})" for report in failed)
        print(f"{len(failed)} of {len(ids)} debates failed: {named}", file=sys.stderr)
        return 1
    print(f"every debate verified ({len(ids)})")
    return 0


def _sign(session: Session, debate_id: int | None, key: bytes) -> int:
    """`audit sign`: sign every intact unsigned seal (of `debate_id`, or of every finished
    debate) and seal the debates that finished before seals; 1 when one does not verify."""
    ids = [debate_id] if debate_id is not None else repository.debate_ids(session, finished=True)
    refused = 0
    for each in ids:
        done, report = repository.sign_seal(session, debate_id=each, key=key)
        if done == "signed":
            print(f"debate {each}: signed its v{report.version} seal (head {report.head})")
        elif done == "sealed":
            print(f"debate {each}: finished before audit seals; sealed and signed as it stands")
        elif not report.ok:
            refused += 1
            print(
                f"debate {each}: not signed: {(report.kind or '').upper()}: {report.problem}",
                file=sys.stderr,
            )
    if refused:
        print(f"{refused} debates do not verify and were not signed", file=sys.stderr)
    return 1 if refused else 0


def _stats(args: argparse.Namespace) -> int:
    """Per-protocol counts (debates, finished, escalated, answered without a debate, thumbs up
    and down) and the operator's dashboard, over `--since` and in `--channel` if given."""
    settings = Settings()
    since = utcnow() - args.since if args.since is not None else None
    with open_store(settings) as engine, session_scope(engine) as session:
        stats = slack_store.protocol_stats(session, since=since, channel_id=args.channel)
        board = operations.dashboard(session, since=since, channel_id=args.channel)
    if args.json:
        protocols = [dataclasses.asdict(s) for s in stats]
        print(json.dumps({"protocols": protocols, **dataclasses.asdict(board)}, indent=2))
        return 0
    scope = f"since {board.since[:16]}Z" if board.since else "all time"
    print(f"debatebot stats, {scope}" + (f", channel {args.channel}" if args.channel else ""))
    print(
        f"\n{'protocol':<12} {'debates':>8} {'finished':>9} {'escalated':>10} {'answered':>9}"
        f" {'thumbs up':>10} {'thumbs down':>12}"
    )
    for s in stats:
        print(
            f"{s.protocol:<12} {s.debates:>8} {s.finished:>9} {s.escalated:>10}"
            f" {s.answered_without_debate:>9} {s.positive:>10} {s.negative:>12}"
        )
    if not stats:
        print("(no debates yet)")
        return 0
    print_dashboard(board)
    return 0


def _percent(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.0%}"


def print_dashboard(board: operations.Dashboard) -> None:
    """The dashboard as a few short tables."""
    levels = ", ".join(f"{level} {n}" for level, n in sorted(board.verdict_levels.items()))
    print(
        f"\nverdicts: {levels or 'none'} \u00b7 LOW confidence"
        f" {_percent(board.low_confidence_share)} \u00b7 escalation rate"
        f" {_percent(board.escalation_rate)}"
    )
    strengths = " ".join(f"{k}:{n}" for k, n in board.critic_strength.items()) or "none"
    print(f"critic challenge strength (1-10: count): {strengths}")
    print(f"\n{'role':<12} {'turns':>6} {'input':>10} {'cached':>10} {'output':>9} {'cost':>10}")
    for role, row in sorted(board.by_role.items()):
        print(
            f"{role:<12} {row['turns']:>6.0f} {row['input']:>10.0f} {row['cached_input']:>10.0f}"
            f" {row['output']:>9.0f} {'$' + format(row['cost_usd'], '.4f'):>10}"
        )
    print(f"\n{'model':<40} {'turns':>6} {'mean s':>8} {'p95 s':>8}")
    for name, row in board.latency_by_model.items():
        print(f"{name[:40]:<40} {row['turns']:>6.0f} {row['mean_s']:>8.2f} {row['p95_s']:>8.2f}")
    print(f"\n{'task type':<16} {'debates':>8} {'cost':>10} {'per debate':>11}")
    for task, row in sorted(board.cost_by_task_type.items()):
        print(
            f"{task:<16} {row['debates']:>8.0f} {'$' + format(row['cost_usd'], '.4f'):>10}"
            f" {'$' + format(row['cost_per_debate_usd'], '.4f'):>11}"
        )
    turnaround = board.reviews["median_turnaround_h"]
    median = "n/a" if turnaround is None else f"{float(turnaround):.1f} h"
    print(
        f"\nreviews: {board.reviews['decided']} decided (median {median}),"
        f" {board.reviews['open']} open, {board.reviews['expired']} expired"
    )
    votes = board.feedback
    print(f"feedback: {votes.get('positive', 0)} up, {votes.get('negative', 0)} down")
    print(
        f"queue now: {board.queue['waiting']:.0f} waiting,"
        f" oldest {board.queue['oldest_wait_s']:.0f} s"
    )
    for job, run in sorted(board.jobs.items()):
        print(f"job {job}: {run['outcome']} at {run['slot']} ({run['detail']})")


def print_audit(report: ChainReport) -> int:
    """Say what verifying found; 0 when nothing is wrong, 1 when something is."""
    where = f"debate {report.debate_id}"
    if not report.ok:
        print(
            f"{where}: {report.kind.upper() if report.kind else 'BROKEN'}: {report.problem}",
            file=sys.stderr,
        )
        return 1
    note = f". Note: {report.note}" if report.note else ""
    if report.sealed:
        covered = (
            " and the verdict"
            if report.version == 1
            else ", the verdict, and the debate's question, spec and ending"
        )
        print(
            f"{where}: verified ({report.turns_checked} turns{covered}; v{report.version} seal,"
            f" head {(report.head or '')[:12]}); signature {report.signature}{note}"
        )
    elif report.note:
        print(
            f"{where}: turn chain verified ({report.turns_checked} turns); signature"
            f" {report.signature}{note}"
        )
    else:
        print(f"{where}: turn chain verified ({report.turns_checked} turns); not sealed yet")
    return 0


def _export(args: argparse.Namespace) -> int:
    settings = Settings()
    with open_store(settings) as engine, session_scope(engine) as session:
        record = export_record(session, debate_id=args.debate_id, key=settings.audit_key_bytes())
    text = (
        json.dumps(record, indent=2, ensure_ascii=False)
        if args.format == "json"
        else render_markdown(record)
    )
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"debate {args.debate_id} exported to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _prompts(args: argparse.Namespace) -> int:
    directory = Path(args.dir) if args.dir else default_prompt_dir()
    if args.action == "lock":
        lock = write_lock(directory)
        print(f"pinned {len(lock)} prompt files in {directory}")
        return 0
    PromptLibrary.load(directory)
    print(f"all prompt files in {directory} match the lock")
    return 0
