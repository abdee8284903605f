"""`debatebot deliveries`: the messages held (their workspace's bot token refused) or given up
(past their deadline), and a retry of one, without SQL (issue 44). `--json` prints JSON."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import Any

from bot.settings import Settings
from bot.store import deliveries
from bot.store.db import session_scope
from bot.store.errors import DeliveryNotRetryableError
from bot.store.outbox_tables import Outbox
from bot.store.tenancy import EVERY_WORKSPACE, Scope, Workspace
from bot.wiring import open_store


def deliveries_command(args: argparse.Namespace) -> int:
    settings = Settings()
    scope: Scope = Workspace(team_id=args.team) if args.team else EVERY_WORKSPACE
    with open_store(settings) as engine, session_scope(engine, workspace=scope) as session:
        if args.action == "list":
            found = deliveries.stuck(session, limit=args.limit)
            if args.json:
                print(json.dumps([_row(s.row) | {"why": s.why.value} for s in found], indent=2))
                return 0
            if not found:
                print("no message is held or given up")
            for entry in found:
                row = entry.row
                print(
                    f"#{row.id}  {entry.why.value:<9} debate {row.debate_id or '-'}  {row.key}"
                    f"  {row.channel_id}  after {row.attempts} attempt(s)"
                    + (f": {row.last_error}" if row.last_error else "")
                )
            return 0
        if args.id is None:
            print("debatebot: deliveries retry needs a message id", file=sys.stderr)
            return 2
        window = timedelta(hours=settings.outbox_deadline_h)
        try:
            row = deliveries.retry(session, outbox_id=args.id, window=window)
        except DeliveryNotRetryableError as error:
            print(f"debatebot: {error}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(_row(row), indent=2))
            return 0
        print(
            f"message #{row.id} ({row.key}) is owed again, due now, for"
            f" {settings.outbox_deadline_h:g} h; a running `debatebot serve` or `worker` sends it"
        )
        return 0


def _row(row: Outbox) -> dict[str, Any]:
    return {
        "id": row.id,
        "debate_id": row.debate_id,
        "team_id": row.team_id,
        "channel_id": row.channel_id,
        "key": row.key,
        "state": row.state.value,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "deadline_at": row.deadline_at.isoformat(),
    }
