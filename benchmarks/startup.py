"""Start-up time of the command line, as a user meets it: `debatebot --help`, and
`debatebot run --provider fake` on a migrated SQLite file, each its own process, median of
`--runs`. For `run`, the start-up is the process's wall time minus the debate's own time (from
the record's started/finished stamps). Goal: under 1 s for both.

    .venv/bin/python -m benchmarks.startup [--runs 5]
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
GOAL_S = 1.0
DEBATEBOT = [sys.executable, "-m", "bot.cli"]


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    # Bytecode is cached as an installed package's is (some CI shells forbid writing it, and
    # then every start recompiles the bot's own modules).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DEBATEBOT_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    helps = [timed([*DEBATEBOT, "--help"], env) for _ in range(args.runs)]
    print(
        f"debatebot --help: goal < {GOAL_S:g} s, measured {statistics.median(helps):.2f} s"
        f" (median of {args.runs}; range {min(helps):.2f}–{max(helps):.2f})"
    )
    with tempfile.TemporaryDirectory() as folder:
        env["DEBATEBOT_DATABASE_URL"] = f"sqlite:///{folder}/startup.sqlite3"
        subprocess.run([*DEBATEBOT, "db", "upgrade"], cwd=ROOT, env=env, check=True)
        walls, starts = [], []
        record = Path(folder) / "record.json"
        for _ in range(args.runs):
            command = [*DEBATEBOT, "run", "--provider", "fake", "Adopt ADR-7?", "--json"]
            wall = timed([*command, str(record)], env)
            result = json.loads(record.read_text(encoding="utf-8"))
            debate = (
                datetime.fromisoformat(result["finished_at"])
                - datetime.fromisoformat(result["started_at"])
            ).total_seconds()
            walls.append(wall)
            starts.append(wall - debate)
    print(
        f"debatebot run --provider fake: wall {statistics.median(walls):.2f} s; start-up and"
        f" shut-down beside the debate: goal < {GOAL_S:g} s, measured"
        f" {statistics.median(starts):.2f} s (median of {args.runs})"
    )


if __name__ == "__main__":
    main()
