"""`debatebot stats`: the operations dashboard over a period."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING

from bot.settings import Settings
from bot.store import operations, overview
from bot.store.db import session_scope
from bot.store.tenancy import scope_for
from bot.wiring import (
    open_store,
)
from engine.models import (
    utcnow,
)

if TYPE_CHECKING:
    pass


def stats(args: argparse.Namespace) -> int:
    """Per-protocol counts (debates, finished, escalated, answered without a debate, thumbs up
    and down) and the operator's dashboard, over `--since` and in `--channel` if given."""
    settings = Settings()
    since = utcnow() - args.since if args.since is not None else None
    with (
        open_store(settings) as engine,
        session_scope(engine, workspace=scope_for(args.team)) as session,
    ):
        stats = overview.protocol_stats(session, since=since, channel_id=args.channel)
        board = operations.dashboard(session, since=since, channel_id=args.channel)
        sources = overview.source_counts(session, since=since, channel_id=args.channel)
    if args.json:
        protocols = [dataclasses.asdict(s) for s in stats]
        document = {"protocols": protocols, "sources": sources, **dataclasses.asdict(board)}
        print(json.dumps(document, indent=2))
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
    print("started by: " + ", ".join(f"{source} {n}" for source, n in sources.items()))
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
    # Whole names, however long: the local model's is its file and hash (about 60 wide).
    width = max([40, *map(len, board.latency_by_model)])
    print(f"\n{'model':<{width}} {'turns':>6} {'mean s':>8} {'p95 s':>8}")
    for name, row in board.latency_by_model.items():
        print(f"{name:<{width}} {row['turns']:>6.0f} {row['mean_s']:>8.2f} {row['p95_s']:>8.2f}")
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
