"""Acknowledge first: the work a listener does after Slack was answered, run as tasks the
process keeps, so stopping waits for them.

Bolt runs with `process_before_response=True` (`bot.wiring.build_bot`), its documented mode
for answering only once the listener returns, which it awaits in line. Its default (False)
starts the listener in a task and polls for `ack()` every 10 ms (slack_bolt's
`AsyncioListenerRunner.run`), a 10 ms floor under every answer. Bolt's own way to go on after
the answer, lazy listeners (`lazy=[...]`), deep-copies the request's context for each lazy
function (the use cases in it with it), only logs a failure, and keeps no reference to its
tasks, so a stopping process could not wait for them. So each listener is wrapped
(`bot.slack.acknowledgement.acknowledging`): it runs in a task started here, and the wrapper returns
to Bolt the moment the listener has called `ack()` (at once for an event, which Bolt
acknowledges itself), while the listener goes on.

The answers come first in time too: while the front door is answering any request
(`answering`), and until it has had nothing to answer for SETTLE_S, the work after an
acknowledgement waits to start (`turn`, at most MAX_DEFER_S), so in a burst the
acknowledgements are not queued behind the store and Slack calls of the requests answered
before them on the one event loop. The waiting work then starts in the order its requests were
answered. (Over Socket Mode, whose answers go back on the socket, nothing is counted and
nothing waits.)

What a listener does before its `ack()` is only what the answer's content needs from the
request itself: the signature and the payload's shape are checked before Bolt sees it
(`bot.slack.server`), and the listener parses. Whatever needs Slack or the store (membership,
channel settings, authority) comes after, and its outcome reaches the person through
`response_url`, an ephemeral message or a DM.

An acknowledged request lives only in its task until its debate is stored. Slack sends no
command or interaction again, and no event it was answered for, so a process that dies in
between loses it (as it did a `/debate` before, whose answer always came first); storing the
raw request before answering would put a store write, which a burst shares with every worker's
turns, back in front of every acknowledgement. So a stopping process gives these tasks the
shutdown grace before the store and Slack's session close, and logs, at ERROR with the request
(who, where, which trigger), any it still had to cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterator
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

_STARTED: ContextVar[list[asyncio.Task[None]] | None] = ContextVar(
    "after_ack_started", default=None
)
"""Where `start` also puts the tasks it starts, inside `collecting`."""

MAX_DEFER_S = 1.0
"""The longest work after an acknowledgement waits for the front door to have no request to
answer: under a flood that never stops, it then runs beside the answers."""
SETTLE_S = 0.005
"""How long the front door must have had nothing to answer before that work starts: the
requests of one burst reach it a fraction of a millisecond apart, so a gap between two of them
is not the end of the burst."""


class AfterAck:
    """The listeners' work after their acknowledgements, in flight, and the requests being
    answered that it gives way to."""

    def __init__(self, *, max_defer_s: float = MAX_DEFER_S, settle_s: float = SETTLE_S) -> None:
        self.max_defer_s = max_defer_s
        self.settle_s = settle_s
        self._running: dict[asyncio.Task[None], str] = {}
        self._answering = 0
        self._answered_at = 0.0
        self._calm: asyncio.Future[None] | None = None

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around the front door's handling of one request, until its answer is sent."""
        self._answering += 1
        try:
            yield
        finally:
            self._answering -= 1
            self._answered_at = asyncio.get_running_loop().time()

    def _settled(self, now: float) -> bool:
        return not self._answering and now >= self._answered_at + self.settle_s

    async def turn(self) -> None:
        """Wait until no request is being answered and none was for `settle_s`, or at most
        `max_defer_s`. The waiting work resumes in the order it began to wait (one future for
        all of it), so requests' work starts in the order they were answered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_defer_s
        if self._settled(loop.time()):
            return
        if self._calm is None or self._calm.done():
            self._calm = loop.create_future()
            self._watch(self._calm)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._calm), deadline - loop.time())

    def _watch(self, calm: asyncio.Future[None]) -> None:
        """Complete `calm` once the front door has settled, looking again every `settle_s`."""
        loop = asyncio.get_running_loop()

        def look() -> None:
            if calm.done():
                return
            now = loop.time()
            if self._settled(now):
                calm.set_result(None)
            else:
                loop.call_at(max(now, self._answered_at) + self.settle_s, look)

        loop.call_at(max(loop.time(), self._answered_at) + self.settle_s, look)

    def start(self, work: Coroutine[Any, Any, None], *, request: str) -> asyncio.Task[None]:
        """Run `work` in a task kept until it ends; `request` names the request it serves in
        the log line of a shutdown that cuts it short."""
        task = asyncio.create_task(work)
        self._running[task] = request
        started = _STARTED.get()
        if started is not None:
            started.append(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    @property
    def running(self) -> int:
        return len(self._running)

    async def drain(self, grace_s: float) -> None:
        """Wait up to `grace_s` for the work in flight to end, then cancel what is left, each
        logged with its request."""
        if not self._running:
            return
        _, late = await asyncio.wait(list(self._running), timeout=grace_s)
        for task in late:
            log.error(
                "stopped before finishing a request Slack was already answered for (%s): if"
                " it asked for a debate, it may not have been queued; the person should ask"
                " again",
                self._running.get(task, "unknown request"),
            )
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


@contextlib.contextmanager
def collecting() -> Iterator[list[asyncio.Task[None]]]:
    """The work `AfterAck.start` starts inside the block, from the task running it: a request
    the process hands its own app (a held event replayed, bot.slack.held) waits for what its
    listener does after the acknowledgement."""
    started: list[asyncio.Task[None]] = []
    token = _STARTED.set(started)
    try:
        yield started
    finally:
        _STARTED.reset(token)
