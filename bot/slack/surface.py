"""What Bolt's listeners reach, put in each request's context as `surface`: the use cases
(starting debates, reviews, App Home, channel settings), the Web API clients they answer
with, the process's pooled Slack session, and the work in flight after acknowledgements."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from sqlalchemy import Engine
from sqlmodel import Session

from bot.slack.after_ack import AfterAck
from bot.slack.channel_config import ChannelConfig
from bot.slack.home import AppHome
from bot.slack.reviews import Reviews
from bot.slack.starts import DebateStarts
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.store import dedupe
from bot.store.db import in_session
from bot.store.tenancy import EVERY_WORKSPACE, Workspace

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slack.held import HeldEvents

R = TypeVar("R")


@dataclass(frozen=True)
class Surface:
    engine: Engine
    poster: SlackPoster
    directory: SlackDirectory
    starts: DebateStarts
    reviews: Reviews
    home: AppHome
    channels: ChannelConfig
    protocols: tuple[str, ...]
    workspace: Workspace
    """The workspace this surface answers: its store work sees only that workspace's rows."""
    slack_http: aiohttp.ClientSession | None = None
    """The process's pooled Slack session, for `respond` (Bolt's own opens one per answer)."""
    after_ack: AfterAck = field(default_factory=AfterAck)
    """The process's work in flight after acknowledgements (one for every workspace)."""
    held: HeldEvents | None = None
    """The process's keeper of events for later (bot.slack.held)."""

    async def keep(self, error: Exception, body: dict[str, Any], context: Any) -> bool:
        """Whether the event `body`, which met `error`, was kept for later (or its sender told
        why not) rather than lost: see bot.slack.held."""
        return self.held is not None and await self.held.keep(error, body, self, context)

    async def db(self, work: Callable[[Session], R]) -> R:
        """Run `work` on the store off the event loop (the listeners' dedupe keys)."""
        return await in_session(self.engine, work, workspace=self.workspace)

    async def event_seen(self, event_id: str) -> bool:
        """Whether Slack's event `event_id` was handled already, by any workspace: Slack's event
        ids are unique across workspaces (bot.store.dedupe)."""
        return await in_session(
            self.engine,
            lambda s: dedupe.event_seen(s, event_id=event_id),
            workspace=EVERY_WORKSPACE,
        )


SurfaceBuilder = Callable[[Workspace, "AsyncWebClient | None"], Surface]
"""Builds the surface of a workspace; with OAuth installs, on the client Bolt made for the
request (its workspace's token); with one workspace, on the bot's own client (None)."""


class Surfaces:
    """Each workspace's `Surface`, built on its first request and kept (the `keep` most
    recent), so its directory's caches serve its next requests. A renewed token makes a new
    one."""

    def __init__(self, build: SurfaceBuilder, *, keep: int = 256) -> None:
        self.build = build
        self.keep = keep
        self._built: OrderedDict[tuple[Workspace, str | None], Surface] = OrderedDict()

    def get(self, workspace: Workspace, client: AsyncWebClient | None = None) -> Surface:
        key = (workspace, getattr(client, "token", None))
        surface = self._built.get(key)
        if surface is None:
            surface = self._built[key] = self.build(workspace, client)
            while len(self._built) > self.keep:
                self._built.popitem(last=False)
        self._built.move_to_end(key)
        return surface
