"""The listener of `app_home_opened`: App Home's tab, or the Messages tab's greeting. The other
events' listeners live beside what they start: `bot.slack.thread_triggers` (ADR posts,
reactions, the thread shortcut) and `bot.slack.assistant` (the Messages tab)."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncSay, AsyncSetSuggestedPrompts
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.assistant import on_messages_tab
from bot.slack.surface import Surface


async def on_home(
    event: dict[str, Any],
    client: AsyncWebClient,
    say: AsyncSay,
    set_suggested_prompts: AsyncSetSuggestedPrompts | None,
    surface: Surface,
) -> None:
    """App Home: reviews waiting, recent debates with their feedback, spend. Its Messages tab
    is the agent's conversation (`agent_view`): a greeting and suggested prompts."""
    if event.get("tab") == "messages" and set_suggested_prompts is not None:
        await on_messages_tab(event, say, set_suggested_prompts, surface)
        return
    if event.get("tab", "home") != "home":
        return
    view = await surface.home.view(user=event["user"])
    await client.views_publish(user_id=event["user"], view=view)
