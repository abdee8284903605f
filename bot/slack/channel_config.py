"""A channel's debate settings as Slack people see them: read by anyone in it, changed only by
workspace admins and the channel's settings owners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from bot.slack.errors import NotAllowedError
from bot.slackweb.people import SlackDirectory
from bot.store import channels
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from bot.store.db import in_session
from bot.store.scoped import WorkspaceStore
from bot.store.tenancy import Workspace


async def channel_settings_of(
    engine: Engine, workspace: Workspace, channel: str
) -> ChannelSettings:
    """`channel`'s stored settings in `workspace` (its defaults when it has none stored): what
    a start, a review's deciders and the settings form all read."""
    return await in_session(
        engine, lambda s: channels.channel_settings(s, channel_id=channel), workspace=workspace
    )


@dataclass(kw_only=True, eq=False)
class ChannelConfig(WorkspaceStore):
    """Reads and changes channels' settings, checking who may change them."""

    directory: SlackDirectory
    defaults: ChannelDefaults

    async def settings_of(self, channel: str) -> ChannelSettings:
        return await channel_settings_of(self.engine, self.workspace, channel)

    async def configure(
        self, *, channel: str, user: str, values: dict[str, Any]
    ) -> ChannelSettings:
        current = await self.settings_of(channel)
        if not await self.directory.may_configure(user, current.owners):
            raise NotAllowedError(
                "Only workspace admins and this channel's settings owners can change its debate"
                " settings. Nothing was changed."
            )
        return await self.db(
            lambda s: channels.save_channel_settings(
                s, channel_id=channel, updated_by=user, values=values
            )
        )
