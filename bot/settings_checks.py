"""The checks of settings that only make sense together, run once every variable is read
(`Settings`' model validator): a ValueError here is reported at start-up as an invalid setting,
naming what to set or unset."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.settings import Settings


def check_together(settings: Settings) -> None:
    """ValueError naming the settings that do not fit together, and the fix."""
    if settings.retention_days is not None and settings.retention_dir is None:
        raise ValueError(
            "DEBATEBOT_RETENTION_DAYS is set but DEBATEBOT_RETENTION_DIR is not: name the"
            " folder where each debate is archived (and verified) before it is removed"
        )
    if settings.mcp_review_channel is not None and settings.slack_bot_token is None:
        # The request is posted by the delivery loop with the bot token of the one workspace
        # the deployment serves; OAuth installs (many workspaces) have no such one workspace
        # for an agent's debate, and a deployment without Slack has nobody to post to.
        raise ValueError(
            "DEBATEBOT_MCP_REVIEW_CHANNEL is set but this deployment has no Slack bot token"
            " (DEBATEBOT_SLACK_BOT_TOKEN) to post review requests with: set the bot token of"
            " the workspace that channel is in, or unset DEBATEBOT_MCP_REVIEW_CHANNEL (agents are"
            " still told when people must decide)"
        )
