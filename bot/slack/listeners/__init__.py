"""Bolt's listeners: which function answers which request, behind the middleware
(`bot.slack.middleware`), each wrapped so that Slack is answered first
(`bot.slack.acknowledgement`), every failure ending in one error handler
(`bot.slack.failures`).

Each listener parses, acknowledges, hands the work to the use cases (`bot.slack.surface`) and
tells the user: `/debate` and its forms (`commands`), the buttons (`actions`), App Home
(`events`), the Stop button and Slack's Stop on an agent session (`stopping`), and the
triggers that post in a thread (`bot.slack.thread_triggers`) and the Messages tab
(`bot.slack.assistant`).
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.messages import action_ids
from bot.slack.acknowledgement import acknowledging
from bot.slack.assistant import build_assistant, on_context_changed
from bot.slack.failures import on_error
from bot.slack.listeners.actions import (
    REVIEW_DECISIONS,
    on_adopt_weights,
    on_debate_anyway,
    on_feedback,
    on_review_button,
    on_review_note,
)
from bot.slack.listeners.commands import on_config_form, on_debate_command, on_debate_form
from bot.slack.listeners.events import on_home
from bot.slack.listeners.stopping import on_session_stopped, on_stop_button
from bot.slack.middleware import preparing
from bot.slack.surface import Surfaces
from bot.slack.thread_triggers import on_message, on_reaction, on_shortcut


def register(app: AsyncApp, surfaces: Surfaces, *, installs: bool = False) -> None:
    """Attach the middleware, the error handler and every listener of the bot to `app`. Each
    request gets the surface of its own workspace; with OAuth `installs`, on the client Bolt
    authorized for it (that workspace's token)."""
    app.middleware(preparing(app.client, surfaces, installs=installs))
    app.use(build_assistant(wrap=acknowledging))
    app.error(on_error)
    listen = acknowledging
    app.command("/debate")(listen(on_debate_command))
    app.view(action_ids.VIEW_DEBATE)(listen(on_debate_form))
    app.view(action_ids.VIEW_CONFIG)(listen(on_config_form))
    for action_id in REVIEW_DECISIONS:
        app.action(action_id)(listen(on_review_button))
    app.view(action_ids.VIEW_REVIEW_NOTE)(listen(on_review_note))
    app.action(action_ids.ACTION_FEEDBACK)(listen(on_feedback))
    app.action(action_ids.ACTION_DEBATE_ANYWAY)(listen(on_debate_anyway))
    app.action(action_ids.ACTION_ADOPT_WEIGHTS)(listen(on_adopt_weights))
    app.action(action_ids.ACTION_STOP)(listen(on_stop_button))
    app.event("agent_session_stopped")(listen(on_session_stopped))
    app.event("message")(listen(on_message))
    app.event("reaction_added")(listen(on_reaction))
    app.shortcut(action_ids.SHORTCUT_DEBATE_THREAD)(listen(on_shortcut))
    app.event("app_home_opened")(listen(on_home))
    app.event("app_context_changed")(listen(on_context_changed))
