"""Stopping a debate (issue 44) on SQLite and PostgreSQL: queued, mid-call, between rounds,
during the judge, with its worker SIGKILLed; idempotent, refused once finished, sealed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session, col

from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store import cancels, queue, turns, verify
from bot.store.debate_tables import CancelSource, Debate, DebateSource, DebateState
from bot.store.errors import CancelRefusedError
from engine.events import DebateEvent, RoundFinished
from engine.llm import LLMRequest
from engine.models import DebateSpec, DebateStatus, ModelSettings
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM
from tests.helpers import SCHEMA_BY_ROLE, DebateScript, reply_for, shipped_prompts
from tests.integration.test_durability import start_worker, turn_count, wait_for

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
    max_rounds=2,
)
PRICED = Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0)


def enqueue(engine: Engine, key: str) -> int:
    with Session(engine) as session:
        debate, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key=key, spec=SPEC, source=DebateSource.COMMAND)
        )
    assert debate.id is not None
    return debate.id


def cancel(engine: Engine, debate_id: int, by: str = "ops") -> cancels.CancelAsked:
    with Session(engine) as session:
        return cancels.request_cancel(session, debate_id=debate_id, by=by, source=CancelSource.CLI)


def stored(engine: Engine, debate_id: int) -> tuple[Debate, list[Any], bool]:
    with Session(engine) as session:
        debate = queue.get_debate(session, debate_id=debate_id)
        rows = turns.turn_rows(session, debate_id=debate_id)
        report = verify.verify_chain(session, debate_id=debate_id)
    return debate, rows, report.ok


class Stalling:
    """The scripted model, whose `nth` call for `role` never answers (until cancelled); every
    request is recorded in order, so a test sees what started after the press."""

    def __init__(self, role: str | None, nth: int = 1, delay_s: float = 0.0) -> None:
        script = DebateScript(moderator=[reply_for("moderator", recommend_another_round=True)])
        self.role_schema = SCHEMA_BY_ROLE[role] if role else None
        self.nth = nth
        self.seen = 0
        self.entered = asyncio.Event()
        self.abandoned = 0

        async def answer(request: LLMRequest) -> Any:
            if request.schema_name == self.role_schema:
                self.seen += 1
                if self.seen == self.nth:
                    self.entered.set()
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        self.abandoned += 1
                        raise
            return script(request)

        self.llm = FunctionLLM(answer, pricing=PRICED, delay_s=delay_s)


def worker(
    llm: FunctionLLM, *, engine: Engine, sink: Callable[[Debate], Any] | None = None
) -> DebateWorker:
    return DebateWorker(
        engine=engine,
        resolve_llm=lambda _s: llm,
        prompts=shipped_prompts(),
        worker_id="w1",
        config=WorkerConfig(cancel_poll_s=0.05),
        sinks=sink,
    )


async def test_a_queued_debate_cancelled_never_starts(store: Engine) -> None:
    debate_id = enqueue(store, "queued")
    asked = cancel(store, debate_id)
    assert asked.new
    assert asked.debate.state == DebateState.QUEUED
    assert not cancel(store, debate_id, by="someone else").new  # idempotent: the first stands
    model = Stalling(None)
    assert await worker(model.llm, engine=store).run_once()
    debate, rows, sealed = stored(store, debate_id)
    assert model.llm.calls == []
    assert (debate.state, debate.outcome) == (DebateState.FINISHED, DebateStatus.CANCELLED)
    assert debate.cancelled_by == "ops"
    assert debate.cancelled_from == CancelSource.CLI
    assert "stopped by ops with debatebot debates cancel" in (debate.error or "")
    assert rows == []
    assert sealed


@pytest.mark.parametrize(
    ("role", "nth"), [("proposer", 1), ("critic", 2), ("independent_judge", 1)]
)
async def test_a_running_debate_cancelled_mid_call_abandons_the_call(
    store: Engine, role: str, nth: int
) -> None:
    debate_id = enqueue(store, f"mid-{role}")
    model = Stalling(role, nth)
    run = asyncio.create_task(worker(model.llm, engine=store).run_once())
    await asyncio.wait_for(model.entered.wait(), 60)
    calls_at_press = len(model.llm.calls)
    await asyncio.to_thread(cancel, store, debate_id)
    assert await asyncio.wait_for(run, 60)
    debate, rows, sealed = stored(store, debate_id)
    assert model.abandoned == 1
    assert len(model.llm.calls) == calls_at_press  # nothing started after the press
    assert len(rows) == calls_at_press - 1  # every answered turn kept, the abandoned one not
    assert debate.outcome == DebateStatus.CANCELLED
    assert debate.state == DebateState.FINISHED
    assert debate.cost_usd == pytest.approx(sum(row.cost_usd for row in rows))
    assert debate.cost_usd > 0  # what was spent stays counted
    assert sealed
    with pytest.raises(CancelRefusedError, match="already finished"):
        cancel(store, debate_id)


async def test_a_cancel_between_rounds_stores_no_turn_of_the_next_round(store: Engine) -> None:
    debate_id = enqueue(store, "between")
    model = Stalling(None, delay_s=0.3)  # each call longer than the worker's poll

    def press_after_round_one(_debate: Debate) -> Callable[[DebateEvent], Any]:
        async def sink(event: DebateEvent) -> None:
            if isinstance(event, RoundFinished) and getattr(event.record, "round", None) == 1:
                await asyncio.to_thread(cancel, store, debate_id)

        return sink

    assert await worker(model.llm, engine=store, sink=press_after_round_one).run_once()
    debate, rows, sealed = stored(store, debate_id)
    assert debate.outcome == DebateStatus.CANCELLED
    assert sealed
    assert {row.round for row in rows} == {0, 1}
    # At most the one call that left in the instant between the press and the round's end.
    assert len(model.llm.calls) - len(rows) <= 1


def test_the_seal_covers_who_stopped_the_debate(store: Engine) -> None:
    debate_id = enqueue(store, "sealed")
    cancel(store, debate_id)
    assert asyncio.run(worker(Stalling(None).llm, engine=store).run_once())
    with Session(store) as session:
        session.execute(
            update(Debate).where(col(Debate.id) == debate_id).values(cancelled_by="somebody else")
        )
        session.commit()
    assert not stored(store, debate_id)[2]


def test_a_cancel_while_its_worker_is_dead_ends_it_at_the_next_claim(
    store: Engine, database_url: str, tmp_path: Path
) -> None:
    debate_id = enqueue(store, "killed")
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = start_worker(database_url, "doomed", first_log, delay_s=0.2)
    wait_for(lambda: turn_count(store, debate_id) >= 3, timeout_s=60)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    kept = turn_count(store, debate_id)
    assert cancel(store, debate_id).debate.state == DebateState.RUNNING  # nobody holds it now
    second = start_worker(database_url, "rescuer", second_log, delay_s=0.0)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    debate, rows, sealed = stored(store, debate_id)
    assert debate.outcome == DebateStatus.CANCELLED
    assert sealed
    assert len(rows) == kept
    assert not second_log.exists() or second_log.read_text() == ""  # no model asked again


def test_the_operator_lists_shows_and_cancels_debates_without_sql(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.cli import main

    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    finished_id = enqueue(store, "done")
    assert asyncio.run(worker(Stalling(None).llm, engine=store).run_once())
    queued_id = enqueue(store, "waiting")
    capsys.readouterr()

    assert main(["debates", "cancel", str(queued_id), "--by", "alice"]) == 0
    assert "stop asked; it ends CANCELLED at its claim" in capsys.readouterr().out
    assert main(["debates", "cancel", str(finished_id)]) == 1
    assert "has already finished (complete); there is nothing to stop" in capsys.readouterr().err
    assert asyncio.run(worker(Stalling(None).llm, engine=store).run_once())

    assert main(["debates", "list", "--state", "cancelled", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["state"], d["cancelled_by"]) for d in listed] == [
        (queued_id, "CANCELLED", "alice")
    ]
    assert main(["debates", "show", str(finished_id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "COMPLETE"
    assert len(shown["turns"]) == 10
    assert shown["cost_usd"] == pytest.approx(sum(t["cost_usd"] for t in shown["turns"]))
    assert main(["debates", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        [f"#{queued_id}", "CANCELLED"],
        [f"#{finished_id}", "COMPLETE"],
    ]
