"""What an operator reads: JSON logs naming the debate and the worker (issue 15)."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from bot.cli import main
from bot.jobs.worker import DebateWorker
from bot.metrics import Metrics
from bot.serving import serve_metrics
from bot.store import queue
from bot.store.db import make_engine
from bot.store.debate_tables import DebateSource
from engine.models import DebateSpec, ModelSettings
from tests.migrated import upgrade

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)
DEBATEBOT = str(Path(sys.executable).with_name("debatebot"))


def queue_debates(url: str, count: int) -> list[int]:
    engine = make_engine(url)
    ids = []
    with Session(engine) as session:
        for n in range(count):
            debate, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(trigger_key=f"ops:{n}", spec=SPEC, source=DebateSource.CLI),
            )
            assert debate.id is not None
            ids.append(debate.id)
    engine.dispose()
    return ids


def test_worker_logs_json_lines_that_name_the_debate_and_the_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'logs.sqlite3'}"
    upgrade(url)
    ids = queue_debates(url, 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(DEBATEBOT_DATABASE_URL=url, DEBATEBOT_PROVIDER="fake", DEBATEBOT_LOG_FORMAT="json")
    done = subprocess.run(
        [DEBATEBOT, "worker", "--name", "w-json", "--exit-when-idle"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert lines, done.stderr
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    finished = [line for line in lines if "at confidence" in line["message"]]
    assert sorted(line["debate_id"] for line in finished) == ids
    assert {line["worker_id"] for line in finished} == {"w-json"}
    assert all(line["level"] == "INFO" for line in finished), "INFO is the default level"


def test_the_workers_metrics_port_serves_prometheus_text() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics = Metrics()
    metrics.lease_losses.inc()
    server = serve_metrics(metrics, "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
    assert "debatebot_lease_losses_total 1.0" in text


def test_a_taken_metrics_port_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'metrics.sqlite3'}"
    upgrade(url)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)
    monkeypatch.setenv("DEBATEBOT_PROVIDER", "fake")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("DEBATEBOT_HTTP_HOST", "127.0.0.1")
        code = main(["worker", "--metrics-port", str(port), "--exit-when-idle"])
    assert code == 1
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_worker_keeps_its_start_up_heap_from_the_collector_only_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'frozen.sqlite3'}"
    upgrade(url)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)
    monkeypatch.setenv("DEBATEBOT_PROVIDER", "fake")
    frozen_at_start: list[int] = []
    run_pool = DebateWorker.run_pool

    async def probed(self: DebateWorker, *args: Any, **kwargs: Any) -> None:
        frozen_at_start.append(gc.get_freeze_count())
        await run_pool(self, *args, **kwargs)

    monkeypatch.setattr(DebateWorker, "run_pool", probed)
    assert gc.get_freeze_count() == 0
    assert main(["worker", "--exit-when-idle"]) == 0
    assert len(frozen_at_start) == 1
    assert frozen_at_start[0] > 10_000, "the pool ran with start-up's heap frozen"
    assert gc.get_freeze_count() == 0, "and it is all collectable again once the command returns"
