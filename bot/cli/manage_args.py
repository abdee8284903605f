"""The options of the operator's commands that manage debates without SQL (issue 44):
`debatebot debates` (list, show, cancel, retry) and `debatebot deliveries` (list, retry)."""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from datetime import timedelta
from typing import Any

STATES = ("queued", "running", "complete", "truncated_budget", "failed", "cancelled")
"""What `--state` takes: a debate not yet ended by its job state, an ended one by how it ended."""


def add_manage_commands(
    commands: Any, *, duration: Callable[[str], timedelta], team_option: Callable[..., None]
) -> None:
    """Add `debates` and `deliveries` to the `debatebot` subcommands."""
    debates: argparse.ArgumentParser = commands.add_parser(
        "debates",
        help="list debates (by state, workspace, channel, age), show one (turns, spend,"
        " deliveries owed), cancel one, or retry a failed one within a new budget",
    )
    debates.add_argument("action", choices=("list", "show", "cancel", "retry"))
    debates.add_argument(
        "id", type=int, nargs="?", metavar="ID", help="the debate (show, cancel, retry)"
    )
    debates.add_argument(
        "--budget",
        type=float,
        metavar="USD",
        help="retry: the debate's whole budget, what it already spent included",
    )
    debates.add_argument("--state", choices=STATES, help="list: only debates in this state")
    debates.add_argument("--channel", metavar="CHANNEL_ID", help="list: only this channel's")
    debates.add_argument(
        "--older-than", type=duration, metavar="AGE", help="list: asked at least AGE ago (30d)"
    )
    debates.add_argument(
        "--newer-than", type=duration, metavar="AGE", help="list: asked at most AGE ago (12h)"
    )
    debates.add_argument("--limit", type=int, default=50, help="list: at most this many (50)")
    debates.add_argument(
        "--by",
        default=getpass.getuser(),
        help="cancel: who asks, as the debate's record names it (your login name)",
    )
    debates.add_argument("--json", action="store_true", help="print JSON")
    team_option(debates)
    debates.set_defaults(handler="debates:debates", is_async=False)
    deliveries: argparse.ArgumentParser = commands.add_parser(
        "deliveries",
        help="list the messages held (bot token refused) or given up (past their deadline),"
        " or owe one again (retry)",
    )
    deliveries.add_argument("action", choices=("list", "retry"))
    deliveries.add_argument("id", type=int, nargs="?", metavar="ID", help="retry: the message")
    deliveries.add_argument("--limit", type=int, default=50, help="list: at most this many (50)")
    deliveries.add_argument("--json", action="store_true", help="print JSON")
    team_option(deliveries)
    deliveries.set_defaults(handler="deliveries:deliveries_command", is_async=False)
