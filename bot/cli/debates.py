"""`debatebot debates`: find, read and stop debates without SQL (issue 44). `list` filters by
state, workspace, channel and age; `show` gives a debate's turns, spend and the messages it
still owes; `cancel` asks whatever worker holds it to stop it (a queued one, or one no worker
holds, ends at its next claim); `retry` queues a failed debate again from its last stored turn
within a new budget. Every command prints JSON with `--json`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from bot.intake.deployment import deployment_intake
from bot.intake.errors import NotAdmittedError
from bot.intake.intake import Started
from bot.intake.request import DebateRequest, FollowUp, Origin, OriginKind
from bot.settings import Settings
from bot.store import cancels, queue, retries, turns
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource, Debate, DebateSource, DebateState
from bot.store.errors import CancelRefusedError, DebateNotFoundError, RetryRefusedError
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import EVERY_WORKSPACE, Scope, Workspace
from bot.wiring import build_services, open_store
from engine.models import DebateSpec, utcnow

OWED = (OutboxState.PENDING, OutboxState.SENDING, OutboxState.FAILED)
"""Outbox rows a debate still owes (failed: held or given up, `debatebot deliveries retry`)."""


def state_of(debate: Debate) -> str:
    """How the CLI names a debate's state: QUEUED or RUNNING (with `, stop asked` once somebody
    asked), or how it ended (COMPLETE, TRUNCATED_BUDGET, FAILED, CANCELLED)."""
    if debate.state == DebateState.FINISHED:
        return (debate.outcome.value if debate.outcome else "FINISHED").upper()
    asked = ", stop asked" if debate.cancel_requested_at is not None else ""
    return f"{debate.state.value.upper()}{asked}"


def debates(args: argparse.Namespace) -> int:
    settings = Settings()
    scope: Scope = Workspace(team_id=args.team) if args.team else EVERY_WORKSPACE
    if args.action == "retry":
        with open_store(settings) as engine:
            try:
                return _retry(
                    settings, engine, scope, args.id, budget=args.budget, as_json=args.json
                )
            except (DebateNotFoundError, RetryRefusedError) as error:
                print(f"debatebot: {error}", file=sys.stderr)
                return 1
    with open_store(settings) as engine, session_scope(engine, workspace=scope) as session:
        if args.action == "list":
            return _list(session, args)
        if args.id is None:
            print(f"debatebot: debates {args.action} needs a debate id", file=sys.stderr)
            return 2
        try:
            if args.action == "show":
                return _show(session, args.id, as_json=args.json)
            return _cancel(session, args.id, by=args.by, as_json=args.json)
        except (DebateNotFoundError, CancelRefusedError) as error:
            print(f"debatebot: {error}", file=sys.stderr)
            return 1


def summary(debate: Debate) -> dict[str, Any]:
    return {
        "id": debate.id,
        "state": state_of(debate).split(",")[0],
        "stop_asked": debate.cancel_requested_at is not None,
        "team_id": debate.team_id,
        "channel_id": debate.channel_id,
        "requested_by": debate.requested_by,
        "protocol": debate.protocol,
        "question": debate.question,
        "cost_usd": debate.cost_usd,
        "created_at": _iso(debate.created_at),
        "finished_at": _iso(debate.finished_at),
        "error": debate.error,
        "cancelled_by": debate.cancelled_by,
        "cancelled_from": debate.cancelled_from.value if debate.cancelled_from else None,
        "cancel_requested_at": _iso(debate.cancel_requested_at),
    }


def _list(session: Session, args: argparse.Namespace) -> int:
    query = select(Debate).order_by(col(Debate.id).desc()).limit(args.limit)
    if args.state in ("queued", "running"):
        query = query.where(Debate.state == DebateState(args.state))
    elif args.state is not None:
        query = query.where(Debate.state == DebateState.FINISHED)
        query = query.where(col(Debate.outcome) == args.state.upper())
    if args.channel:
        query = query.where(Debate.channel_id == args.channel)
    now = utcnow()
    if args.older_than is not None:
        query = query.where(col(Debate.created_at) <= now - args.older_than)
    if args.newer_than is not None:
        query = query.where(col(Debate.created_at) >= now - args.newer_than)
    found = list(session.exec(query))
    if args.json:
        print(json.dumps([summary(debate) for debate in found], indent=2))
        return 0
    if not found:
        print("no debates match")
    for debate in found:
        cost = f"${debate.cost_usd:.4f}"
        print(
            f"#{debate.id}  {state_of(debate):<22} {debate.protocol:<12} {cost:>9}"
            f"  {debate.channel_id or '-':<12} {debate.created_at:%Y-%m-%d %H:%M}"
            f"  {debate.question[:60]}"
        )
    return 0


def _show(session: Session, debate_id: int, *, as_json: bool) -> int:
    debate = queue.get_debate(session, debate_id=debate_id)
    rows = turns.turn_rows(session, debate_id=debate_id)
    owed = list(
        session.exec(
            select(Outbox)
            .where(Outbox.debate_id == debate_id, col(Outbox.state).in_([s.value for s in OWED]))
            .order_by(col(Outbox.id))
        )
    )
    turn_list = [
        {
            "round": row.round,
            "role": row.role,
            "speaker": row.speaker,
            "model": f"{row.provider}:{row.model}",
            "cost_usd": row.cost_usd,
            "created_at": _iso(row.created_at),
        }
        for row in rows
    ]
    deliveries = [
        {
            "id": row.id,
            "key": row.key,
            "state": row.state.value,
            "attempts": row.attempts,
            "last_error": row.last_error,
        }
        for row in owed
    ]
    if as_json:
        document = summary(debate) | {"turns": turn_list, "deliveries_owed": deliveries}
        print(json.dumps(document, indent=2))
        return 0
    print(f"debate #{debate.id}: {state_of(debate)}  ({debate.protocol})")
    print(f"  question: {debate.question}")
    print(
        f"  asked by {debate.requested_by or '-'} in {debate.channel_id or '-'}"
        f" at {debate.created_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    if debate.error:
        print(f"  {debate.error}")
    print(f"  spend: ${sum(row.cost_usd for row in rows):.4f} over {len(rows)} turn(s)")
    for turn in turn_list:
        who = f" {turn['speaker']}" if turn["speaker"] else ""
        print(
            f"    round {turn['round']} {turn['role']}{who}  {turn['model']}"
            f"  ${turn['cost_usd']:.4f}"
        )
    print(f"  deliveries owed: {len(deliveries) or 'none'}")
    for owed_row in deliveries:
        error = f": {owed_row['last_error']}" if owed_row["last_error"] else ""
        print(
            f"    #{owed_row['id']} {owed_row['key']} {owed_row['state']}"
            f" after {owed_row['attempts']} attempt(s){error}"
        )
    return 0


def _cancel(session: Session, debate_id: int, *, by: str, as_json: bool) -> int:
    asked = cancels.request_cancel(session, debate_id=debate_id, by=by, source=CancelSource.CLI)
    debate = asked.debate
    if as_json:
        print(json.dumps(summary(debate) | {"new_request": asked.new}, indent=2))
        return 0
    if not asked.new:
        print(
            f"debate #{debate_id}: already asked to stop by {debate.cancelled_by}; it ends"
            " CANCELLED when its worker sees it (or at its next claim)"
        )
    elif debate.state == DebateState.QUEUED:
        print(
            f"debate #{debate_id}: stop asked; it ends CANCELLED at its claim, with no model call"
        )
    else:
        print(
            f"debate #{debate_id}: stop asked; the worker holding it abandons its call and ends"
            " it CANCELLED (if no worker runs, at the next claim)"
        )
    return 0


def _retry(
    settings: Settings,
    engine: Engine,
    scope: Scope,
    debate_id: int | None,
    *,
    budget: float | None,
    as_json: bool,
) -> int:
    if debate_id is None or budget is None or budget <= 0:
        print(
            "debatebot: debates retry needs a debate id and --budget USD (above what it spent)",
            file=sys.stderr,
        )
        return 2
    with session_scope(engine, workspace=scope) as session:
        original = queue.get_debate(session, debate_id=debate_id)
    # The retry is written in the original's workspace (the store stamps new rows with it).
    home = Workspace(team_id=original.team_id or "", enterprise_id=original.enterprise_id)
    with session_scope(engine, workspace=home) as own:
        original, spec = retries.retried_spec(own, debate_id=debate_id, budget_usd=budget)
        kept = len(turns.turn_rows(own, debate_id=debate_id))
    try:
        started = asyncio.run(_admitted(settings, engine, home, _retry_request(original, spec)))
    except NotAdmittedError as error:
        print(f"debatebot: debate {debate_id} was not retried: {error}", file=sys.stderr)
        return 1
    fork, created = started.debate, started.created
    if as_json:
        print(json.dumps(summary(fork) | {"retry_of": debate_id, "new": created}, indent=2))
        return 0
    if not created:
        print(f"debate #{debate_id} was already retried as debate #{fork.id}")
        return 0
    print(
        f"debate #{debate_id} retried as debate #{fork.id} with a budget of ${budget:g}:"
        f" its {kept} stored turn(s) are replayed, not asked again; a running `debatebot"
        " worker` or `serve` runs it"
    )
    return 0


def _retry_request(original: Debate, spec: DebateSpec) -> DebateRequest:
    """The retry as a request from the terminal: a follow-up that carries the original's turns
    forward in its place and thread, for whoever asked for the original."""
    assert original.id is not None
    return DebateRequest(
        trigger_key=retries.retry_key(original.id),
        source=DebateSource.CLI,
        asked=FollowUp(
            original_id=original.id,
            spec=spec,
            continues=True,
            reviewers_place=original.reviewers_channel_id,
        ),
        origin=Origin(OriginKind.TERMINAL, place=original.channel_id, thread=original.thread_ts),
        requested_by=original.requested_by,
        review_in=original.review_channel_id,
        link=original.link,
    )


async def _admitted(
    settings: Settings, engine: Engine, workspace: Workspace, request: DebateRequest
) -> Started:
    """`request` admitted and queued by the intake every door shares (the same debates in
    flight and monthly caps); NotAdmittedError says why not."""
    services = build_services(settings)
    try:
        intake = deployment_intake(settings, services.policy, engine, workspace=workspace)
        return await intake.submit(request)
    finally:
        await services.aclose()


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
