"""`debatebot workspace`: the workspaces installed on this deployment and whether Slack takes
each one's bot token, a workspace's records, and deleting them when an admin asks (an
uninstalled workspace's stay, as evidence, under the retention policy)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from bot.jobs.scheduled import archive
from bot.settings import Settings, SettingsError
from bot.slackweb.token import workspace_token_fix
from bot.store import operations, refusals, workspaces
from bot.store.cipher import TokenCipher
from bot.store.db import session_scope
from bot.store.errors import TokenDecryptError
from bot.store.refusals import BotState
from bot.store.rekey import rekey_tokens
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from bot.wiring import open_store


def workspace(args: argparse.Namespace) -> int:
    """`list`: every install (OAuth) and whether Slack takes its bot token (if not: its code,
    since when, when it is asked again, what to do), or with a team id how many debates the
    workspace has and its install's state; `delete`: archive each of its debates to
    `--archive` (written, read back and verified, as retention does), delete each once its
    archive verifies, then the workspace's other records. A debate whose archive does not
    verify is kept, and so is everything else of the workspace; the command says which."""
    settings = Settings()
    if args.action == "rekey":
        return _rekey(settings)
    with open_store(settings) as engine:
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            installed = refusals.bots(session)
        if args.team is None:
            if args.action == "delete":
                print("debatebot: workspace delete needs the team id (T…)", file=sys.stderr)
                return 2
            _list(installed)
            return 0
        team = Workspace(team_id=args.team)
        with session_scope(engine, workspace=team) as session:
            ids = workspaces.debate_ids(session)
        if args.action == "list":
            print(f"workspace {args.team}: {len(ids)} debate(s)")
            for bot in installed:
                if bot.team_id == args.team:
                    print(_line(bot))
            return 0
        return _delete(engine, team, ids, args.archive, settings.audit_key_bytes())


def _rekey(settings: Settings) -> int:
    """`rekey`: every stored token sealed again with the first key of
    DEBATEBOT_TOKEN_ENCRYPTION_KEY (all or none)."""
    try:
        oauth = settings.slack_oauth()
    except SettingsError as error:
        print(f"debatebot: {error}", file=sys.stderr)
        return 2
    if oauth is None:
        print(
            "debatebot: workspace rekey re-encrypts OAuth installs' tokens; set"
            " DEBATEBOT_SLACK_CLIENT_ID, _CLIENT_SECRET and DEBATEBOT_TOKEN_ENCRYPTION_KEY",
            file=sys.stderr,
        )
        return 2
    with (
        open_store(settings) as engine,
        session_scope(engine, workspace=EVERY_WORKSPACE) as session,
    ):
        try:
            done = rekey_tokens(session, cipher=TokenCipher(*oauth.encryption_keys))
        except TokenDecryptError as error:
            print(f"debatebot: nothing was re-encrypted: {error}", file=sys.stderr)
            return 1
    print(
        f"re-encrypted {done.resealed} stored token(s) with the first key;"
        f" {done.current} already were. The other keys can now be removed from"
        " DEBATEBOT_TOKEN_ENCRYPTION_KEY"
    )
    return 0


def _list(installed: list[BotState]) -> None:
    if not installed:
        print(
            "no OAuth installs in this database (one workspace: its bot token is"
            " DEBATEBOT_SLACK_BOT_TOKEN)"
        )
        return
    for bot in installed:
        print(_line(bot))
    refused = sum(1 for bot in installed if bot.refusal is not None)
    print(f"{len(installed)} install(s), {refused} whose bot token Slack refuses")


def _line(bot: BotState) -> str:
    """One install: its key and name, and whether Slack takes its bot token."""
    name = bot.team_name or bot.enterprise_name or "(no name)"
    head = f"{bot.installation}  {name}"
    refusal = bot.refusal
    if refusal is None:
        return f"{head}: Slack takes its bot token"
    asked = f"; asked again at {_when(refusal.probe_at)}" if refusal.probe_at else ""
    return (
        f"{head}: Slack refuses its bot token ({refusal.code}) since {_when(refusal.since)}"
        f"{asked}; its debates wait and what it is owed is held. To fix it:"
        f" {workspace_token_fix(refusal.code, refusal.scope)}"
    )


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _delete(
    engine: Engine, team: Workspace, ids: list[int], archive_dir: str | None, key: bytes | None
) -> int:
    if archive_dir is None:
        print(
            "debatebot: workspace delete archives every debate first: pass --archive DIR",
            file=sys.stderr,
        )
        return 2
    folder = Path(archive_dir)
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
        f"workspace {team.team_id}: {len(ids)} debate(s) archived to {folder} (verified) and"
        f" deleted, with {others} other record(s)"
    )
    return 0
