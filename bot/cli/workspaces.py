"""`debatebot workspace`: a workspace's records on this deployment, and deleting them when an
admin asks (an uninstalled workspace's stay, as evidence, under the retention policy)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.jobs.scheduled import archive
from bot.settings import Settings
from bot.store import operations, workspaces
from bot.store.db import session_scope
from bot.store.tenancy import Workspace
from bot.wiring import open_store


def workspace(args: argparse.Namespace) -> int:
    """`list`: how many debates the workspace has; `delete`: archive each of its debates to
    `--archive` (written, read back and verified, as retention does), delete each once its
    archive verifies, then the workspace's other records. A debate whose archive does not
    verify is kept, and so is everything else of the workspace; the command says which."""
    settings = Settings()
    team = Workspace(team_id=args.team)
    key = settings.audit_key_bytes()
    with open_store(settings) as engine:
        with session_scope(engine, workspace=team) as session:
            ids = workspaces.debate_ids(session)
        if args.action == "list":
            print(f"workspace {args.team}: {len(ids)} debate(s)")
            return 0
        if args.archive is None:
            print(
                "debatebot: workspace delete archives every debate first: pass --archive DIR",
                file=sys.stderr,
            )
            return 2
        folder = Path(args.archive)
        kept: list[tuple[int, str]] = []
        for debate_id in ids:
            with session_scope(engine, workspace=team) as session:
                problem = archive(session, debate_id=debate_id, folder=folder, key=key)
                if problem is None:
                    operations.remove_debate(session, debate_id=debate_id)
            if problem is not None:
                kept.append((debate_id, problem))
        if kept:
            for debate_id, problem in kept:
                print(f"debatebot: debate {debate_id} kept: {problem}", file=sys.stderr)
            print(
                f"debatebot: {len(ids) - len(kept)} of {len(ids)} debate(s) archived to {folder}"
                f" and deleted; the workspace's other records are kept until every debate is",
                file=sys.stderr,
            )
            return 1
        with session_scope(engine, workspace=team) as session:
            others = workspaces.delete_remaining(session)
    print(
        f"workspace {args.team}: {len(ids)} debate(s) archived to {folder} (verified) and"
        f" deleted, with {others} other record(s)"
    )
    return 0
