"""Wall time, tokens and model-time share of `debatebot run` on the local model (one round).

Runs the real CLI as a subprocess on a case from examples/review_cases.jsonl, reads the JSON
record it writes, and reports, from that one run: process wall time, debate time, time inside
model calls (sum of turn latencies, re-asks included, first-call model load included), tokens,
and shares. Also times loading the GGUF alone, so the load can be told apart from generation.

    .venv/bin/python benchmarks/local_run.py [--case N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "examples" / "review_cases.jsonl"
GOAL_S = 60.0


def load_seconds() -> float:
    from llama_cpp import Llama

    from engine.providers.local import smollm2_path

    started = time.perf_counter()
    Llama(model_path=str(smollm2_path()), n_ctx=8192, verbose=False)
    return time.perf_counter() - started


def migrated_env(workdir: Path) -> dict[str, str]:
    """The environment for the CLI: a fresh, migrated SQLite store inside `workdir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env["DEBATEBOT_DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    subprocess.run(
        [sys.executable, "-m", "bot.cli", "db", "upgrade"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def one_run(case: dict[str, str], workdir: Path, env: dict[str, str]) -> dict[str, float]:
    context = workdir / "context.md"
    context.write_text(case["context"], encoding="utf-8")
    record = workdir / "record.json"
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "run",
            case["question"],
            "--context",
            str(context),
            "--json",
            str(record),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    data = json.loads(record.read_text(encoding="utf-8"))
    debate = (
        datetime.fromisoformat(data["finished_at"]) - datetime.fromisoformat(data["started_at"])
    ).total_seconds()
    model = sum(turn["latency_s"] for turn in data["transcript"])
    return {
        "wall_s": wall,
        "debate_s": debate,
        "model_s": model,
        "turns": len(data["transcript"]),
        "reasks": sum(turn["reasks"] for turn in data["transcript"]),
        "input_tokens": data["usage"]["input_tokens"],
        "output_tokens": data["usage"]["output_tokens"],
        "status": data["verdict"]["status"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    case = json.loads(CASES.read_text(encoding="utf-8").splitlines()[args.case])
    load = load_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        env = migrated_env(Path(tmp))
        runs = [one_run(case, Path(tmp), env) for _ in range(args.runs)]
    for i, run in enumerate(runs, 1):
        print(f"run {i}: {json.dumps(run)}")
    wall = statistics.median(r["wall_s"] for r in runs)
    model = statistics.median(r["model_s"] for r in runs)
    out_tokens = statistics.median(r["output_tokens"] for r in runs)
    print(
        f"case {case['id']}: median wall {wall:.1f}s, model calls {model:.1f}s"
        f" ({model / wall:.0%} of wall), GGUF load alone {load:.2f}s"
        f" ({load / wall:.1%} of wall), output {out_tokens / model:.1f} tokens/s of model time"
    )
    print(f"one-round debate on the local model: goal < {GOAL_S:g} s, measured {wall:.1f} s")


if __name__ == "__main__":
    main()
