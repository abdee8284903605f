"""`debatebot eval` end to end: every arm on the schema-filling fake, resume after a kill, the
budget guard, and the local model on one case, every arm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main
from engine.evaluation.arms import all_arms
from engine.evaluation.scoring import ArmResult
from tests.helpers import LLAMA_GROUP, REVIEW_CASES, local_threads
from tests.integration.llm_server import OPENAI_USAGE, ModelServer, Step, schema_name

DEBATEBOT = str(Path(sys.executable).with_name("debatebot"))
FAKE = ["eval", "--cases", str(REVIEW_CASES), "--provider", "fake"]


def stored(folder: Path) -> list[ArmResult]:
    results = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        try:
            results.append(ArmResult.model_validate_json(line))
        except ValueError:
            continue
    return results


EVAL_ARMS = all_arms()


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DEBATEBOT_") and not name.startswith("DEBATEBOT_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_every_arm_runs_on_three_cases_and_the_report_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    code = main([*FAKE, "--limit", "3", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "3 case(s) x 8 arm(s) on fake:fake-model; 0 run(s) already" in err
    assert "$0.00 (estimate)" in err

    results = stored(out)
    assert len(results) == 3 * 2 * len(EVAL_ARMS), "every arm on each planted and clean document"
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert {r.arm for r in results} == set(EVAL_ARMS)
    raw = json.loads((out / "results.json").read_text())
    assert set(raw["scores"]) == set(EVAL_ARMS)
    assert all(raw["scores"][arm]["flaws_planted"] == 9 for arm in EVAL_ARMS)
    by_task = raw["scores_by_task_type"]
    assert set(by_task) == {"architecture"}
    assert by_task["architecture"]["vote"]["runs"] == 6
    report = (out / "report.md").read_text()
    for arm in EVAL_ARMS:
        assert f"\n| {arm} | " in report
    assert "## What this means" in report
    assert (out / "frontier.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "frontier.svg").read_text().lstrip().startswith("<?xml")
    vote = next(r for r in results if r.arm == "vote")
    assert len(vote.samples) >= 3, "k matched to the debate's tokens, odd, at least 3"

    again = main([*FAKE, "--limit", "3", "--out", str(out)])
    assert again == 0
    assert "48 run(s) already in" in capsys.readouterr().err
    assert len(stored(out)) == 48, "a rerun of a finished eval runs nothing"


def test_a_killed_eval_resumes_without_running_any_finished_pair_twice(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    argv = [
        DEBATEBOT,
        *FAKE,
        "--limit",
        "3",
        "--arms",
        "single,adversarial,vote",
        "--out",
        str(out),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env["DEBATEBOT_FAKE_DELAY_S"] = "0.05"
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (out / "results.jsonl").exists() and len(stored(out)) >= 4:
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    before = {r.key: r.run_id for r in stored(out)}
    assert 4 <= len(before) < 18, "killed mid-run"

    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"{len(before)} run(s) already in" in second.stderr
    after = stored(out)
    keys = [r.key for r in after]
    assert len(keys) == len(set(keys)) == 3 * 2 * 3, "each (case, arm, document) ran once"
    first_run = {r.run_id for r in after if r.key in before}
    assert len(first_run) == 1, "the finished pairs kept the first run's results"
    assert {r.run_id for r in after if r.key not in before}.isdisjoint(first_run)


def test_paid_runs_need_yes_and_max_cost_stops_before_passing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(
        "DEBATEBOT_PRICES", '{"fake:fake-model": {"input_per_mtok": 3, "output_per_mtok": 15}}'
    )
    out = tmp_path / "paid"
    argv = [*FAKE, "--limit", "2", "--arms", "single,adversarial", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "run it again with --yes" in err
    assert not (out / "results.jsonl").exists() or stored(out) == []

    assert main([*argv, "--yes", "--max-cost", "0.001"]) == 3
    err = capsys.readouterr().err
    assert "stopped before case" not in err
    assert "would pass --max-cost 0.001" in err
    assert "**Incomplete:**" in (out / "report.md").read_text()


def test_an_unknown_arm_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["eval", "--cases", str(REVIEW_CASES), "--arms", "single,debate"])
    assert refused.value.code == 2
    assert "unknown arm(s) debate; arms are single, vote, best_of_n" in capsys.readouterr().err


@pytest.mark.local_model
@pytest.mark.xdist_group(LLAMA_GROUP)
def test_the_local_model_runs_a_case_single_and_vote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baselines' pipelines on the real local model (a single review, and a vote of three);
    one case does that (the cases' aggregation is the same code whatever the model, tested on
    the fake), and a second one doubled the suite's longest test. The debate arms run the
    engine's `run_debate`, which the local model runs in the CLI's own debate
    (test_local_model.py) and in test_protocols_local.py."""
    monkeypatch.setenv("DEBATEBOT_MAX_TOKENS", "256")
    monkeypatch.setenv("DEBATEBOT_LOCAL_THREADS", str(local_threads()))
    out = tmp_path / "local"
    arms = ["--arms", "single,vote", "--vote-k", "3", "--no-controls"]
    local = ["eval", "--cases", str(REVIEW_CASES), "--provider", "local", "--limit", "1"]
    code = main([*local, *arms, "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    results = stored(out)
    assert sorted((r.case_id, r.arm) for r in results) == [
        ("adr-001", arm) for arm in ("single", "vote")
    ]
    ran = [r for r in results if r.ok]
    assert ran, [r.error for r in results]
    assert all(r.input_tokens > 0 and r.calls >= 1 for r in ran)
    assert all(r.error for r in results if not r.ok), "a failed arm says why"
    assert "| vote |" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Step(status=503, error="overloaded"), "HTTP 503 (Error code: 503 - overloaded)"),
        (Step(hang_s=3), "did not answer within 0.5s"),
    ],
    ids=["5xx", "hang"],
)
async def test_a_judge_that_fails_over_http_fails_best_of_n_alone_and_a_rerun_judges_again(
    server: ModelServer,
    fault: Step,
    cause: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Through the openai SDK against the loopback server: best-of-n's judge call answers 503
    or hangs past the timeout. The other arms finish; best-of-n is recorded as failed with the
    reason, printed and counted in the report; the rerun retries only the judge, on the vote's
    stored samples, and charges best-of-n for them."""
    from bot.cli import evaluate
    from bot.cli.parser import build_parser

    monkeypatch.setenv("DEBATEBOT_OPENAI_COMPATIBLE_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("DEBATEBOT_OPENAI_COMPATIBLE_MODEL", "loopback")
    monkeypatch.setenv("DEBATEBOT_LLM_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("DEBATEBOT_LLM_TIMEOUT_S", "0.5")
    out = tmp_path / "eval"
    argv = [
        "eval",
        "--cases",
        str(REVIEW_CASES),
        "--provider",
        "openai-compatible",
        "--limit",
        "1",
        "--arms",
        "single,vote,best_of_n",
        "--vote-k",
        "3",
        "--no-controls",
        "--out",
        str(out),
    ]
    server.always_fail("PickedReview", fault)

    assert await evaluate.evaluate(build_parser().parse_args(argv)) == 0
    err = capsys.readouterr().err
    failure = next(line for line in err.splitlines() if line.startswith("failed: "))
    assert failure.startswith("failed: adr-001/best_of_n (planted): RetriesExhaustedError:")
    assert cause in failure
    assert "adr-001/best_of_n FAILED" in err
    results = {r.arm: r for r in stored(out)}
    assert results["single"].ok
    assert results["vote"].ok
    assert not results["best_of_n"].ok
    assert results["best_of_n"].error
    assert "\n| best_of_n | n/a | 0 / 0 |" in (out / "report.md").read_text()

    server.fail_schema.clear()
    asked = len(server.requests)
    assert await evaluate.evaluate(build_parser().parse_args(argv)) == 0
    assert "2 run(s) already in" in capsys.readouterr().err
    assert [schema_name("openai", r.body) for r in server.requests[asked:]] == ["PickedReview"]
    best = next(r for r in stored(out)[::-1] if r.arm == "best_of_n")
    vote = results["vote"]
    assert best.ok
    assert best.calls == vote.calls + 1
    assert best.input_tokens == vote.input_tokens + OPENAI_USAGE["prompt_tokens"]
    assert best.output_tokens == vote.output_tokens + OPENAI_USAGE["completion_tokens"]
