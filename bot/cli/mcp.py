"""`debatebot mcp`: the MCP server over stdio, for a coding agent on this machine (stdio trusts
the local user). It runs the debates it admits in this process unless `--no-run` leaves them to
`debatebot worker`; context files are read only under `--allow-dir` directories. Nothing but
the protocol may reach stdout, so every note goes to stderr."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import sys
import uuid
from pathlib import Path

from bot.fronts.mcp.paths import AllowedDirs
from bot.fronts.mcp.reading import Reader
from bot.fronts.mcp.server import McpFront, build_server
from bot.settings import Settings
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import build_services, build_worker, open_store
from bot.wiring.surfaces import build_intake
from bot.wiring.work import build_notifier

log = logging.getLogger(__name__)


async def mcp(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        allowed = AllowedDirs([Path(d) for d in args.allow_dir])
    except OSError as error:
        print(f"debatebot: --allow-dir: {error}", file=sys.stderr)
        return 2
    settings = Settings()
    services = build_services(settings)
    try:
        with open_store(settings) as engine:
            # The notifier stages an escalated debate's review request for the channel set for
            # agents (DEBATEBOT_MCP_REVIEW_CHANNEL); `serve` or a worker delivers it.
            worker = build_worker(
                services,
                engine,
                worker_id=f"mcp:{uuid.uuid4().hex[:8]}",
                reporter=build_notifier(settings, engine),
            )

            async def run(debate_id: int) -> None:
                # As `debatebot run` does: claim the admitted debate and run it here; a worker
                # that claimed it first runs it instead.
                claimed = await worker.claim_with_run(debate_id)
                if claimed is None:
                    return
                debate, stored = claimed
                await worker.execute(debate, stored=stored)

            front = McpFront(
                intake=build_intake(settings, services, engine, workspace=PENDING_WORKSPACE),
                reader=Reader(engine, key=settings.audit_key_bytes()),
                allowed=allowed,
                requested_by=f"mcp:{getpass.getuser()}",
                run=None if args.no_run else run,
                hosts=services.hosts,
            )
            # Debates a worker elsewhere runs change only in the store: read for listeners.
            watching = asyncio.create_task(front.watch().run_forever())
            try:
                await build_server(front).run_stdio_async()
            finally:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
    finally:
        await services.aclose()
    return 0
