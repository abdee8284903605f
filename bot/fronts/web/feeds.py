"""Live turns for the page and `GET /api/debates/{id}/events`: one reader of the store per
followed debate, however many streams follow it, so fifty open pages cost one query per poll.
It reads what the worker stored (whichever process ran it), so a stream started after a reload
or a dropped connection sends only what the client has not seen (`after`, or `Last-Event-ID`).
When this process runs the debate, the turns being written are sent too (`event: writing`,
from the worker's `WritingBoard`): the readable text so far, never stored, so not resumable."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlmodel import Session

from bot.fronts.web.reading import TurnOut, debate_out, turns_after
from bot.jobs.writing import WritingBoard
from bot.store import queue
from bot.store.db import in_session
from bot.store.debate_tables import DebateState
from bot.store.errors import StoreError
from bot.store.tenancy import Workspace

KEEPALIVE_S = 15.0
"""A comment line this often keeps proxies from closing an idle stream."""


@dataclass
class _Feed:
    turns: list[TurnOut] = field(default_factory=list)
    finished: str | None = None
    """The whole debate as JSON once it is finished (the stream's last event)."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    followers: int = 0
    reader: asyncio.Task[None] | None = None
    writing_version: int = 0


class Feeds:
    """The feeds of the debates being followed, each read every `poll_s` while followed."""

    def __init__(
        self,
        engine: Engine,
        *,
        workspace: Workspace,
        poll_s: float = 0.1,
        writing: WritingBoard | None = None,
    ) -> None:
        self.engine = engine
        self.workspace = workspace
        self.poll_s = poll_s
        self.board = writing
        self._feeds: dict[int, _Feed] = {}

    def _read(
        self, session: Session, debate_id: int, after: int
    ) -> tuple[list[TurnOut], str | None]:
        turns = turns_after(session, debate_id=debate_id, after=after)
        debate = queue.get_debate(session, debate_id=debate_id)
        if debate.state != DebateState.FINISHED:
            return turns, None
        return turns, debate_out(session, debate_id=debate_id).model_dump_json()

    async def _poll(self, debate_id: int, feed: _Feed) -> None:
        while feed.finished is None:
            read = functools.partial(
                self._read, debate_id=debate_id, after=feed.turns[-1].seq if feed.turns else -1
            )
            try:
                turns, finished = await in_session(self.engine, read, workspace=self.workspace)
            except StoreError:
                # The store is down for a moment: the streams stay open and catch up after.
                await asyncio.sleep(self.poll_s * 10)
                continue
            written = self.board.version(debate_id) if self.board is not None else 0
            if turns or finished is not None or written != feed.writing_version:
                feed.writing_version = written
                feed.turns.extend(turns)
                feed.finished = finished
                feed.changed.set()
                feed.changed = asyncio.Event()
            if finished is None:
                await asyncio.sleep(self.poll_s)

    async def follow(self, debate_id: int, *, after: int = -1) -> AsyncIterator[str]:
        """The debate's events as server-sent event text: each turn stored after `after`
        (`event: turn`, id its sequence number), the turns being written when they change
        (`event: writing`, a list of each one's identity and text so far), then the whole
        debate once it is finished (`event: end`), when the stream ends."""
        feed = self._feeds.setdefault(debate_id, _Feed())
        feed.followers += 1
        if feed.reader is None or feed.reader.done():
            feed.reader = asyncio.create_task(self._poll(debate_id, feed))
        try:
            sent = after
            shown = 0
            while True:
                waiting = feed.changed
                for turn in feed.turns:
                    if turn.seq > sent:
                        sent = turn.seq
                        yield f"id: {turn.seq}\nevent: turn\ndata: {turn.model_dump_json()}\n\n"
                if self.board is not None and feed.writing_version != shown:
                    shown = feed.writing_version
                    now = [w.model_dump(mode="json") for w in self.board.writing(debate_id)]
                    yield f"event: writing\ndata: {json.dumps(now)}\n\n"
                if feed.finished is not None:
                    yield f"event: end\ndata: {feed.finished}\n\n"
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiting.wait(), KEEPALIVE_S)
                    continue
                yield ": still running\n\n"
        finally:
            feed.followers -= 1
            if feed.followers == 0:
                self._feeds.pop(debate_id, None)
                if feed.reader is not None:
                    feed.reader.cancel()

    async def aclose(self) -> None:
        for feed in list(self._feeds.values()):
            if feed.reader is not None:
                feed.reader.cancel()
        self._feeds.clear()


def last_event_id(header: str | None, after: str | None) -> int:
    """Where a stream resumes: the browser's `Last-Event-ID` on a reconnect, else `after`."""
    for value in (header, after):
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    return -1
