"""What Bolt's listeners reach, put in each request's context as `surface`: the use cases
(starting debates, reviews, App Home, channel settings), the Web API clients they answer
with, the process's pooled Slack session, and the work in flight after acknowledgements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

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
from bot.store.db import in_session

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
    slack_http: aiohttp.ClientSession | None = None
    """The process's pooled Slack session, for `respond` (Bolt's own opens one per answer)."""
    after_ack: AfterAck = field(default_factory=AfterAck)

    async def db(self, work: Callable[[Session], R]) -> R:
        """Run `work` on the store off the event loop (the listeners' dedupe keys)."""
        return await in_session(self.engine, work)
