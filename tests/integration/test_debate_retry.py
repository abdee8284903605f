"""`debatebot debates retry ID --budget USD` (issue 44): a FAILED debate resumes from its last
stored turn as a follow-up debate within the new budget, and the model is asked only for the
turns never stored; a debate that did not fail, or a budget already spent, is refused. SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.store.debate_tables import Debate
from engine.errors import ModelNotAvailableError
from engine.llm import LLMRequest
from engine.models import DebateStatus
from engine.providers.fake import FunctionLLM
from tests.helpers import DebateScript, reply_for
from tests.integration.test_cancel import PRICED, enqueue, stored, worker


class Recording:
    """The scripted model, recording each call's schema; it fails for good at call `fail_at`."""

    def __init__(self, fail_at: int | None = None) -> None:
        script = DebateScript(moderator=[reply_for("moderator", recommend_another_round=True)])
        self.asked: list[str | None] = []

        def answer(request: LLMRequest) -> Any:
            self.asked.append(request.schema_name)
            if fail_at is not None and len(self.asked) == fail_at:
                raise ModelNotAvailableError("the model was withdrawn")
            return script(request)

        self.llm = FunctionLLM(answer, pricing=PRICED)


def test_a_failed_debate_resumes_without_asking_a_stored_turn_again(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.cli import main

    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    whole = Recording()
    complete_id = enqueue(store, "whole")
    assert asyncio.run(worker(whole.llm, engine=store).run_once())

    failing = Recording(fail_at=6)
    failed_id = enqueue(store, "fails")
    assert asyncio.run(worker(failing.llm, engine=store).run_once())
    failed, kept, _ = stored(store, failed_id)
    assert failed.outcome == DebateStatus.FAILED
    assert 0 < len(kept) < len(whole.asked)
    capsys.readouterr()

    assert main(["debates", "retry", str(complete_id), "--budget", "5"]) == 1
    assert "is complete: only a failed debate" in capsys.readouterr().err
    assert main(["debates", "retry", str(failed_id), "--budget", "0.000001"]) == 1
    assert "name a --budget above that" in capsys.readouterr().err
    assert main(["debates", "retry", str(failed_id), "--budget", "1000", "--json"]) == 0
    retry = json.loads(capsys.readouterr().out)
    assert (retry["retry_of"], retry["state"], retry["new"]) == (failed_id, "QUEUED", True)

    resumed = Recording()
    assert asyncio.run(worker(resumed.llm, engine=store).run_once())
    ended, rows, chained = stored(store, retry["id"])
    assert ended.outcome == DebateStatus.COMPLETE
    assert chained
    # Only what was never stored is asked: the whole run's calls after the stored turns.
    assert resumed.asked == whole.asked[len(kept) :]
    assert [(r.round, r.role, r.request_sha256) for r in rows[: len(kept)]] == [
        (r.round, r.role, r.request_sha256) for r in kept
    ]
    assert main(["debates", "retry", str(failed_id), "--budget", "1000"]) == 0
    assert f"already retried as debate #{retry['id']}" in capsys.readouterr().out


def test_a_retry_is_admitted_like_any_request(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A retry goes through the one intake (issue 43): past the monthly cap, or at the limit of
    debates in flight, it is refused with the reason and the setting, and nothing is queued."""
    from bot.cli import main

    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    failed_id = enqueue(store, "fails")
    assert asyncio.run(worker(Recording(fail_at=3).llm, engine=store).run_once())
    assert stored(store, failed_id)[0].outcome == DebateStatus.FAILED
    capsys.readouterr()

    monkeypatch.setenv("DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD", "2")
    assert main(["debates", "retry", str(failed_id), "--budget", "5"]) == 1
    said = capsys.readouterr().err
    assert f"debate {failed_id} was not retried: The workspace has spent $" in said
    assert "this debate could cost up to $5.00, so nothing was queued" in said
    assert "DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD" in said

    monkeypatch.delenv("DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD")
    monkeypatch.setenv("DEBATEBOT_MAX_DEBATES_PER_CHANNEL", "1")
    enqueue(store, "waiting")  # queued, asked from the terminal like the retry
    assert main(["debates", "retry", str(failed_id), "--budget", "5"]) == 1
    said = capsys.readouterr().err
    assert "there are already 1 debates asked outside Slack" in said
    assert "DEBATEBOT_MAX_DEBATES_PER_CHANNEL=1" in said
    with Session(store) as session:
        assert [d.trigger_key for d in session.exec(select(Debate))] == ["fails", "waiting"]
