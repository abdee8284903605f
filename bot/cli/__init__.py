"""`debatebot` command line: run debates, run workers, manage the database, audit and export.

`main` only parses (`bot.cli.parser`); the module of the chosen command (one per command group:
`run`, `models`, `processes`, `database`, `audit`, `stats`, `calibration`, `workspaces`,
`evaluate`, `prompt_lock`, `settings_doc`) is imported once it is chosen, so `--help` and a
mistyped option answer at once (a test keeps the provider SDKs, Slack and uvicorn out of
`import bot.cli`).

`run` exit codes: 0 debate complete, 1 debate failed or bad input, 2 usage error, 3 cut short by
the budget ceiling. Other commands: 0 success, 1 failure (with the reason on stderr).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from bot.cli.parser import build_parser
from bot.settings import Settings, SettingsError
from bot.store.errors import StoreError
from engine.errors import EngineError
from engine.readable import readable


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, _, function = args.handler.partition(":")
    handler = getattr(importlib.import_module(f"bot.cli.{module}"), function)
    try:
        if args.is_async:
            code: int = asyncio.run(handler(args))
        else:
            code = handler(args)
    except (EngineError, StoreError, SettingsError) as error:
        print(f"debatebot: {error}", file=sys.stderr)
        return 1
    except ValidationError as error:
        if error.title != Settings.__name__:
            raise
        problems = readable(error, lambda where: f"DEBATEBOT_{where.replace('.', '__').upper()}")
        print(f"debatebot: invalid setting: {problems}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("debatebot: interrupted", file=sys.stderr)
        return 130
    return code
