"""The durable debate worker: claim a queued debate with a lease, run it, store every turn.

- Every finished turn is written (hash-chained) before the next one starts: the engine awaits the
  event sink, and the sink writes the turn. The run keeps its debate's chain head in memory, and
  the process's `TurnWriter` commits the turns of all its debates that finish together in one
  transaction (its `FinishWriter` does the same for endings).
- A heartbeat renews the lease while the debate runs. A worker that dies stops renewing; once the
  lease expires another worker claims the debate and resumes it from its stored turns, which the
  engine replays without calling a model.
- A worker that finds its lease taken (it stalled past the lease) stops at once; the unique turn
  key in the database would refuse its writes anyway.
- A worker stopped from outside (SIGTERM) stops claiming, lets each running debate finish the
  turn it is in (so the tokens it paid for are stored), and hands the lease back before the next
  model call, so another worker resumes the debate at once instead of when the lease expires.
  A turn still running when the grace period ends is cancelled, and its lease handed back too.
- A Slack debate whose thread became unreachable (`debate.halt_reason`) stops before its next
  model call and ends FAILED with that reason. The reason is read with the claim and with each
  turn's write (which reads the debate's lease row anyway), not by a read before every call.
- A debate a person stopped is seen within `cancel_poll_s` by the worker holding it, or at its
  claim (bot.jobs.cancelling): the call in flight is abandoned, and it ends CANCELLED.
- The ending is stored in one transaction with the messages it owes (`bot.jobs.closing`).
- A debate whose spec cannot run, or that was claimed again and again without storing a turn,
  is ended FAILED with the reason instead of run (`bot.jobs.unrunnable`), so no debate is
  claimed forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.jobs.cancelling import DEFAULT_POLL_S, CancelWatch, stopped_run
from bot.jobs.closing import FinishWriter
from bot.jobs.pause import OutagePause
from bot.jobs.unrunnable import MAX_FRUITLESS_CLAIMS, stored_spec, why_not_run
from bot.logs import debate_context
from bot.metrics import Metrics
from bot.store import endings, queue, turns, workspaces
from bot.store.calibration import weights_and_samples
from bot.store.cancels import cancel_reason
from bot.store.db import in_session
from bot.store.debate_tables import Debate, TriageState
from bot.store.errors import DatabaseUnavailableError, LeaseLostError, StoreRefusedError
from bot.store.receipts import ReceiptIssuer
from bot.store.tenancy import EVERY_WORKSPACE, owner_of
from bot.store.writer import TurnWriter
from engine import triage
from engine.calibration.sampling import ReviewSampler
from engine.errors import LLMError
from engine.events import DebateCancelled, DebateEvent, DebateFailed, EventSink, TurnFinished
from engine.ledger import BudgetExhausted, HaltCheck, LLMResolver
from engine.models import DebateResult, DebateSpec, DebateStatus, TurnRecord
from engine.prompts import PromptLibrary
from engine.runner import ended_cancelled, ended_unrun, run_debate

log = logging.getLogger(__name__)
R = TypeVar("R")
StoredRun = tuple[list[TurnRecord], turns.ChainHead]
"""A debate's stored turns and the head of its chain."""
SinkFactory = Callable[[Debate], EventSink]
"""Builds an extra event sink for one debate (the console)."""
Follower = Callable[[Debate, DebateResult], Awaitable[None]]
"""Told of each debate stored as finished (the pull request comment); handles its own errors."""


class ShuttingDown(Exception):
    """Raised at a turn boundary once the worker drains, or its debate's workspace is
    suspended (uninstalled): the run stops and hands its lease back; it is never stored as the
    debate's failure."""


class DebateReporter(Protocol):
    """What a worker tells people through (the Slack notifier): the events of a run as owed
    messages. A debate it reports on owes messages at its ending too (`bot.jobs.closing`)."""

    def owes_messages(self, debate: Debate) -> bool:
        """Whether the debate has anyone to tell (a Slack thread): one that has not gets no
        sink and ends without staging messages, which spares its ending batch two reads."""
        ...

    def sink_for(self, debate: Debate, spec: DebateSpec) -> EventSink: ...

    def wake(self) -> None: ...


def start_delays(count: int, wave: int, gap_s: float) -> list[float]:
    """When each of `count` debates claimed together starts: `wave` at a time, `gap_s` apart."""
    return [(index // max(wave, 1)) * gap_s for index in range(count)]


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class WorkerConfig:
    lease_s: float = 60.0
    heartbeat_s: float = 15.0
    poll_s: float = 1.0
    audit_key: bytes | None = None
    """Signs the audit seal written when a debate finishes."""
    start_wave: int = 25
    start_gap_s: float = 0.01
    """Debates claimed together start `start_wave` at a time, `start_gap_s` apart (run_pool)."""
    review_sample: ReviewSampler | None = None
    """Draws the completed Slack verdicts that did not escalate but are reviewed anyway, as a
    sample for calibration; None draws none."""
    max_fruitless_claims: int = MAX_FRUITLESS_CLAIMS
    """A debate claimed this many times without storing a turn is ended FAILED, not run."""
    receipts: ReceiptIssuer | None = None
    """Issues each finished debate's signed receipt; None issues none."""
    cancel_poll_s: float = DEFAULT_POLL_S
    """How often the worker reads whether a person stopped one of its debates."""


class DebateWorker:
    """Runs queued debates from the store, as many at once as `run_pool` is given slots."""

    def __init__(
        self,
        *,
        engine: Engine,
        resolve_llm: LLMResolver,
        prompts: PromptLibrary,
        worker_id: str | None = None,
        config: WorkerConfig | None = None,
        sinks: SinkFactory | None = None,
        reporter: DebateReporter | None = None,
        turns: TurnWriter | None = None,
        endings: FinishWriter | None = None,
        metrics: Metrics | None = None,
        followers: Sequence[Follower] = (),
        may_claim: Callable[[], bool] = lambda: True,
    ) -> None:
        self.engine = engine
        self.metrics = metrics
        self.followers = tuple(followers)
        self.may_claim = may_claim
        self.turns = turns or TurnWriter(engine)
        self.endings = endings or FinishWriter(engine)
        self.resolve_llm = resolve_llm
        self.prompts = prompts
        self.worker_id = worker_id or default_worker_id()
        self.config = config or WorkerConfig()
        self.sinks = sinks
        self.reporter = reporter
        self._wake = asyncio.Event()
        self._draining = asyncio.Event()
        self.cancels = CancelWatch(engine, poll_s=self.config.cancel_poll_s)

    def _drawn_for_review(self, result: DebateResult, sampled: int) -> bool:
        """Whether a verdict that did not escalate is sent for review as a sample: only a
        complete debate's (a triage's single answer has no debate's confidence to check), at
        the share its workspace's `sampled` reviews call for."""
        sampler = self.config.review_sample
        verdict = result.verdict
        if sampler is None or verdict.escalate or verdict.status is not DebateStatus.COMPLETE:
            return False
        if not ((result.report or {}).get("triage") or {}).get("debated", True):
            return False
        return sampler.draw(sampled)

    async def _db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work, workspace=EVERY_WORKSPACE)

    async def claim(self, debate_id: int | None = None) -> Debate | None:
        """Claim the next claimable debate, or only `debate_id` when given."""
        return await self._db(
            lambda s: queue.claim_debate(
                s, worker_id=self.worker_id, lease_s=self.config.lease_s, debate_id=debate_id
            )
        )

    async def claim_with_run(self, debate_id: int) -> tuple[Debate, StoredRun] | None:
        """Claim `debate_id` and read its stored turns in one unit of store work (the CLI runs the
        debate it queued): one trip to the store thread instead of two before the first model
        call. None when another worker holds it."""

        def work(session: Session) -> tuple[Debate, StoredRun] | None:
            debate = queue.claim_debate(
                session, worker_id=self.worker_id, lease_s=self.config.lease_s, debate_id=debate_id
            )
            if debate is None:
                return None
            return debate, turns.stored_runs(session, debate_ids=[debate_id])[debate_id]

        return await self._db(work)

    async def claim_many(self, limit: int) -> list[Debate]:
        """Claim up to `limit` claimable debates in one statement."""
        return await self._db(
            lambda s: queue.claim_debates(
                s, worker_id=self.worker_id, lease_s=self.config.lease_s, limit=limit
            )
        )

    async def _heartbeat(self, debate_id: int, runner: asyncio.Task[DebateResult]) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_s)
            try:
                await self._db(
                    lambda s: queue.renew_lease(
                        s,
                        debate_id=debate_id,
                        worker_id=self.worker_id,
                        lease_s=self.config.lease_s,
                    )
                )
            except LeaseLostError:
                log.warning("debate %s: lease lost, stopping this worker's run", debate_id)
                self._lease_lost()
                runner.cancel()
                return
            except DatabaseUnavailableError as error:
                log.warning("debate %s: heartbeat failed (%s); will retry", debate_id, error)

    async def execute(
        self, debate: Debate, *, stored: StoredRun | None = None
    ) -> DebateResult | None:
        """Run (or resume) a claimed debate to its end; None if the lease was lost on the way.
        `stored` is its turns and chain head when the caller read them (for a whole batch).
        Everything logged meanwhile names the debate and this worker (bot.logs)."""
        with debate_context(debate.id, self.worker_id):
            return await self._execute(debate, stored)

    async def _execute(self, debate: Debate, stored: StoredRun | None) -> DebateResult | None:
        assert debate.id is not None
        debate_id = debate.id
        spec, unreadable = stored_spec(debate)
        # Read even on a first claim: a reviewer's "another round" starts a debate that carries
        # its parent's turns.
        if stored is None:
            stored = await self._db(
                lambda s: turns.stored_runs(s, debate_ids=[debate_id])[debate_id]
            )
        recorded, head = stored
        # The weights an admin of its workspace adopted last score this verdict (the verdict
        # records their version); read per debate, so an adoption applies from the next debate
        # to end. The deployment's own adoptions (a terminal's, pending) count too.
        owner = replace(owner_of(debate), with_pending=True)
        weights, sampled = await in_session(self.engine, weights_and_samples, workspace=owner)
        unrun = unreadable or why_not_run(
            debate, spec, len(recorded), self.config.max_fruitless_claims
        )
        if unrun is not None:
            log.error("debate %s: ended without running: %s", debate_id, unrun)
        elif recorded:
            log.info("debate %s: resuming after %d stored turns", debate_id, len(recorded))
        else:
            log.info("debate %s: starting (%s)", debate_id, spec.protocol)

        extras = [make(debate) for make in (self.sinks,) if make is not None]
        reporter = self.reporter if self.reporter and self.reporter.owes_messages(debate) else None
        if reporter is not None:
            extras.append(reporter.sink_for(debate, spec))
        if self.metrics is not None:
            extras.append(self.metrics.observe)
        # Protocols with concurrent turns (panel) finish several at once; the chain links each
        # turn to the previous one, so they are appended one at a time.
        chain = asyncio.Lock()
        # The halt reason as the claim, then each turn's write, found it: every model call
        # follows one of them, so checking it costs no store read of its own.
        halted = debate.halt_reason
        # A turn's write outlives a cancel of its run (shielded); a stopped run's ending waits.
        writing: set[asyncio.Future[turns.ChainHead]] = set()

        stop_asked = False

        async def persist(event: DebateEvent) -> None:
            nonlocal head, halted, stop_asked
            if isinstance(event, TurnFinished) and not event.replayed:
                async with chain:
                    write = asyncio.ensure_future(
                        self.turns.append(
                            turns.TurnWrite(debate_id, self.worker_id, event.turn, head)
                        )
                    )
                    writing.add(write)
                    write.add_done_callback(writing.discard)
                    head = await asyncio.shield(write)
                    halted, stop_asked = head.halt_reason, head.stop_asked
            for extra in extras:
                await extra(event)

        async def halt() -> str | None:
            if stop_asked:  # found with the last turn's write: no further call starts
                await self.cancels.stop(debate_id)
            if self._draining.is_set():
                raise ShuttingDown(f"debate {debate_id}: worker {self.worker_id} is stopping")
            if halted == workspaces.SUSPENDED:
                # Not an ending: the workspace may install the app again, and then it resumes.
                log.warning("debate %s: %s; handed back", debate_id, halted)
                raise ShuttingDown(f"debate {debate_id}: {halted}")
            return halted

        async def run() -> DebateResult:
            if debate.cancel_requested_at is not None:
                # Asked to stop while queued, or while no worker held it: no model call.
                ended = ended_cancelled(spec, cancel_reason(debate), recorded)
                await persist(DebateCancelled(reason=ended.error or "", result=ended))
                return ended
            if unrun is not None:
                ended = ended_unrun(spec, unrun, recorded)
                await persist(DebateFailed(error=unrun, result=ended))
                return ended
            outcome = None
            if debate.triage == TriageState.PENDING:
                outcome = await self._triage(debate_id, spec, persist, recorded, halt)
                if outcome is not None and not outcome.gate.debate:
                    return triage.answered(spec, outcome)
            result = await run_debate(
                spec,
                resolve_llm=self.resolve_llm,
                prompts=self.prompts,
                sink=persist,
                # The triage's turn, stored or just asked, counts against the debate's budget.
                recorded=[*recorded, outcome.turn] if outcome is not None else recorded,
                halt=halt,
                weights=weights,
            )
            return triage.debated(result, outcome) if outcome is not None else result

        runner = asyncio.create_task(run())
        heartbeat = asyncio.create_task(self._heartbeat(debate_id, runner))
        self.cancels.watch(debate_id, runner)
        try:
            result = await runner
        except ShuttingDown:
            await self._hand_back(debate_id)
            return None
        except LeaseLostError:
            log.warning("debate %s: abandoned by %s (lease lost)", debate_id, self.worker_id)
            self._lease_lost()
            return None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                await self._hand_back(debate_id)
                raise
            if not self.cancels.asked(debate_id):
                # Not us being cancelled: the heartbeat cancelled the run as the lease was lost.
                log.warning("debate %s: abandoned by %s (lease lost)", debate_id, self.worker_id)
                return None
            await asyncio.gather(*writing, return_exceptions=True)
            result, head = await stopped_run(self.engine, debate_id, spec)
            await persist(DebateCancelled(reason=result.error or "", result=result))
        finally:
            self.cancels.unwatch(debate_id)
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        try:
            await self.endings.finish(
                endings.Finish(
                    debate_id,
                    self.worker_id,
                    result,
                    owes_messages=reporter is not None,
                    audit_key=self.config.audit_key,
                    head=head,
                    sampled=reporter is not None and self._drawn_for_review(result, sampled),
                    receipts=self.config.receipts,
                )
            )
        except LeaseLostError:
            log.warning("debate %s: finished after losing the lease; result dropped", debate_id)
            self._lease_lost()
            return None
        if reporter is not None:
            reporter.wake()
        if self.metrics is not None:
            self.metrics.debate_ended(result)
        for follow in self.followers:
            await follow(debate, result)
        log.info(
            "debate %s: %s, %s at confidence %.2f%s, $%.4f",
            debate_id,
            result.verdict.status.value,
            result.verdict.decision.value,
            result.verdict.confidence,
            ", escalated" if result.verdict.escalate else "",
            result.cost_usd,
        )
        return result

    def _lease_lost(self) -> None:
        if self.metrics is not None:
            self.metrics.lease_losses.inc()

    async def _triage(
        self,
        debate_id: int,
        spec: DebateSpec,
        sink: EventSink,
        recorded: list[TurnRecord],
        halt: HaltCheck | None,
    ) -> triage.Triage | None:
        """The triage's decision (replayed on resume); None when it failed, so the debate runs:
        when in doubt, debate."""
        try:
            return await triage.triage(
                spec,
                resolve_llm=self.resolve_llm,
                prompts=self.prompts,
                sink=sink,
                recorded=recorded,
                halt=halt,
            )
        except (LLMError, BudgetExhausted) as error:
            log.warning("debate %s: triage failed (%s); debating", debate_id, error)
            return None

    async def _hand_back(self, debate_id: int) -> None:
        """Shutdown: release the lease so another worker resumes now, not when it expires.

        The release runs to its end even when this task is cancelled meanwhile (shutdown past
        its grace cancels what still runs): a half-done hand-back would leave the debate to wait
        out its lease. A cancellation that arrived is raised once the release is done.
        """
        release = asyncio.ensure_future(
            self._db(
                lambda s: queue.release_lease(s, debate_id=debate_id, worker_id=self.worker_id)
            )
        )
        cancelled = False
        while not release.done():
            try:
                # Unlike awaiting it, waiting for it never cancels the release.
                await asyncio.wait({release})
            except asyncio.CancelledError:
                cancelled = True
        error = release.exception()
        if error is not None:
            log.warning("debate %s: lease not handed back (%s); it expires", debate_id, error)
        else:
            log.info("debate %s: handed back by %s for another worker", debate_id, self.worker_id)
        if cancelled:
            raise asyncio.CancelledError

    async def run_once(self) -> bool:
        """Claim and run one debate; False when none was waiting."""
        debate = await self.claim()
        if debate is None:
            return False
        await self.execute(debate)
        return True

    def wake(self) -> None:
        """Look for work now instead of at the next poll (a debate was just queued here)."""
        self._wake.set()

    async def run_pool(
        self, stop: asyncio.Event, *, concurrency: int, exit_when_idle: bool = False
    ) -> None:
        """Run up to `concurrency` debates at once on this event loop until `stop` is set (or,
        with `exit_when_idle`, until nothing is running or waiting). Once `stop` is set, each
        running debate ends at its next turn boundary and hands its lease back (`ShuttingDown`).

        Free slots are filled by one claim of as many debates as are free, not one claim per
        slot: at 200 slots, 200 claims each waiting for the database's write lock cost more
        than the debates' own store work. A database outage pauses claiming; running debates
        go on. When cancelled (shutdown past its grace), every running debate is cancelled and
        hands its lease back.

        The debates of one claim start in waves (`WorkerConfig.start_wave` at a time,
        `start_gap_s` apart), not in the same instant. Started together, they move in lockstep:
        their model answers arrive within a few milliseconds, the event loop handles them all
        before the store thread commits any, every turn waits for one large commit and the next
        calls leave in one burst again, at every turn. Started in waves, one wave's turns are
        committed while the next wave's answers are handled (`benchmarks/scale.py` measures
        it). A debate still waiting for its wave when the pool stops hands its lease
        back without a model call.
        """
        self._draining.clear()
        outage = OutagePause(f"worker {self.worker_id}")
        running: set[asyncio.Task[DebateResult | None]] = set()
        try:
            while not stop.is_set():
                free = concurrency - len(running)
                claimed: list[Debate] = []
                # No new debate while it could not be told (Slack refuses the bot token).
                if free > 0 and self.may_claim():
                    try:
                        claimed = await self.claim_many(free)
                    except DatabaseUnavailableError as error:
                        await outage.failed(error, stop, log)
                        continue
                    outage.succeeded(log)
                stored = await self._stored(claimed)
                waves = start_delays(len(claimed), self.config.start_wave, self.config.start_gap_s)
                for debate, delay in zip(claimed, waves, strict=True):
                    task = asyncio.create_task(
                        self._run_claimed(debate, stored.get(debate.id), delay)
                    )
                    running.add(task)
                    task.add_done_callback(running.discard)
                if not running and not claimed and exit_when_idle:
                    return
                if free == 0 or (claimed and len(claimed) == free):
                    await self._until_slot_frees(running, stop)
                elif not claimed:
                    await self._until_work(running, stop, exit_when_idle=exit_when_idle)
            self._draining.set()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
        finally:
            for task in running:
                # A task already cancelled (by the gather above) is handing its lease back.
                if not task.cancelling():
                    task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _stored(self, claimed: list[Debate]) -> dict[int | None, StoredRun]:
        """The stored turns of a batch of claimed debates in one read; {} when it fails (each
        debate then reads its own)."""
        if not claimed:
            return {}
        ids = [debate.id for debate in claimed if debate.id is not None]
        try:
            runs = await self._db(lambda s: turns.stored_runs(s, debate_ids=ids))
        except DatabaseUnavailableError:
            return {}
        return dict(runs.items())

    async def _run_claimed(
        self, debate: Debate, stored: StoredRun | None, start_after: float
    ) -> DebateResult | None:
        try:
            if start_after > 0 and not await self._wave_comes(debate, start_after):
                return None
            return await self.execute(debate, stored=stored)
        except StoreRefusedError:
            # The debate's lease expires and it is resumed; this worker goes on working.
            log.exception("worker %s: the store refused a debate's write", self.worker_id)
            return None
        except DatabaseUnavailableError as error:
            log.error(
                "debate %s: stopped by a database outage (%s); resumed later", debate.id, error
            )
            return None

    async def _wave_comes(self, debate: Debate, delay: float) -> bool:
        """Wait `delay` for the debate's wave (run_pool); False, with the lease handed back, if
        the pool stopped meanwhile. Cancelled meanwhile, it hands the lease back too."""
        assert debate.id is not None
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._draining.wait(), delay)
        except asyncio.CancelledError:
            await self._hand_back(debate.id)
            raise
        if self._draining.is_set():
            await self._hand_back(debate.id)
            return False
        return True

    async def _until_slot_frees(
        self, running: set[asyncio.Task[DebateResult | None]], stop: asyncio.Event
    ) -> None:
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([*running, stopping], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def _until_work(
        self,
        running: set[asyncio.Task[DebateResult | None]],
        stop: asyncio.Event,
        *,
        exit_when_idle: bool,
    ) -> None:
        """The queue was found empty: wait for a poll, a wake-up or a stop (and, with
        `exit_when_idle`, for the last running debate to end). Not for each running debate's
        end: with 200 ending together, a claim after each, finding nothing, was one more store
        trip in every ending batch's way."""
        waits: list[asyncio.Task[object]] = [
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self._wake.wait()),
        ]
        if exit_when_idle and running:
            waits.append(asyncio.create_task(asyncio.wait(running)))
        try:
            await asyncio.wait(
                waits, timeout=self.config.poll_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in waits:
                task.cancel()
        self._wake.clear()
