"""Ctrl-C in `debatebot run` (issue 44): the first one stops the debate as any cancel does (a
request on its row, CancelSource.TERMINAL, which the worker's poll turns into an abandoned call
and a CANCELLED ending with the partial record); a second one exits at once, leaving the debate
to the next claim, which finds the request and ends it."""

from __future__ import annotations

import asyncio
import getpass
import os
import signal
import sys
from types import TracebackType

from sqlalchemy import Engine

from bot.store import cancels
from bot.store.debate_tables import CancelSource
from bot.store.errors import CancelRefusedError, StoreError
from bot.store.tenancy import Workspace

EXIT_AT_ONCE = 130
"""The shell's code for a process ended by SIGINT."""


class CtrlC:
    """While entered, SIGINT asks to stop debate `debate_id` the first time, and exits the
    process the second time."""

    def __init__(self, engine: Engine, *, debate_id: int, workspace: Workspace) -> None:
        self.engine = engine
        self.debate_id = debate_id
        self.workspace = workspace
        self.pressed = 0
        self._asking: asyncio.Task[None] | None = None

    def __enter__(self) -> CtrlC:
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._pressed)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    def _pressed(self) -> None:
        self.pressed += 1
        if self.pressed > 1:
            print(
                f"\ndebatebot: exiting now; debate {self.debate_id} ends CANCELLED at its next"
                " claim (`debatebot worker`, or `debatebot debates show` to see it)",
                file=sys.stderr,
                flush=True,
            )
            os._exit(EXIT_AT_ONCE)  # at once, as asked: no awaiting the call in flight
        print(
            f"\ndebatebot: stopping debate {self.debate_id}; Ctrl-C again exits at once",
            file=sys.stderr,
            flush=True,
        )
        self._asking = asyncio.create_task(self._ask())

    async def _ask(self) -> None:
        by = _operator()
        try:
            await cancels.ask_cancel(
                self.engine,
                workspace=self.workspace,
                debate_id=self.debate_id,
                by=by,
                source=CancelSource.TERMINAL,
            )
        except CancelRefusedError:
            return  # it ended meanwhile: its result is printed as usual
        except StoreError as error:
            print(f"debatebot: the debate could not be stopped: {error}", file=sys.stderr)


def _operator() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no password entry for this uid
        return "terminal"
