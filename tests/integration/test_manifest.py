"""The shipped Slack app manifest asks for exactly what the code uses."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.messages import action_ids
from bot.secrets import REDIRECT_PATH
from bot.slack.assistant import SUGGESTED_PROMPTS
from bot.slack.installs import BOT_SCOPES

ROOT = Path(__file__).resolve().parents[2]
SCOPE_OF_METHOD = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_delete": "chat:write",
    "conversations_replies": "channels:history",
    "users_info": "users:read",
    "usergroups_users_list": "usergroups:read",
    "users_conversations": "channels:read",
    "conversations_info": "channels:read",
    "users_list": "users:read",
    "conversations_open": "im:write",
    "assistant_threads_setStatus": "assistant:write",
    # "Authentication token bearing the chat:write scope"; the app declared an agent.
    "agents_sessions_setStatus": "chat:write",
    "files_info": "files:read",
    # "The files:write scope allows your app to upload files": a debate's receipt.
    "files_getUploadURLExternal": "files:write",
    "files_completeUploadExternal": "files:write",
}
ASSISTANT_EVENTS = {"assistant_thread_started", "assistant_thread_context_changed"}
"""The assistant pane's events: still handled (Bolt's Assistant middleware) for an app whose
manifest has `assistant_view`; the shipped manifest has `agent_view`, which sends none."""


def source() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "bot").rglob("*.py"))


def test_manifest_matches_the_listeners_and_the_api_calls() -> None:
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())
    code = source()

    events = set(re.findall(r'app\.event\("([a-z_]+)"\)', code))
    subscribed = {
        e.split(".")[0] for e in manifest["settings"]["event_subscriptions"]["bot_events"]
    }
    # Bolt's Assistant middleware listens for the assistant events and the thread's messages.
    assert "AsyncAssistant()" in code
    assert "app.use(build_assistant(" in code
    assert subscribed == events
    assert not subscribed & ASSISTANT_EVENTS
    assert "message.im" in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "assistant_view" not in manifest["features"]
    assert manifest["features"]["agent_view"]["agent_description"]
    prompts = manifest["features"]["agent_view"]["suggested_prompts"]
    assert [(p["title"], p["message"]) for p in prompts] == [
        (p["title"], p["message"]) for p in SUGGESTED_PROMPTS
    ]

    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == "/debate"
    assert 'app.command("/debate")' in code
    assert command["should_escape"] is True
    [shortcut] = manifest["features"]["shortcuts"]
    assert shortcut["callback_id"] == action_ids.SHORTCUT_DEBATE_THREAD
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    # Review requests fall back to DMs from the app, which need its Messages tab.
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True

    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    called = {m for m in SCOPE_OF_METHOD if re.search(rf'\b{m}\b|"{m}"', code)}
    assert called == set(SCOPE_OF_METHOD)
    needed = {SCOPE_OF_METHOD[m] for m in called} | {"commands", "reactions:read", "im:history"}
    assert needed <= scopes
    # Private channels need the group twins of the channel scopes; nothing more is asked for.
    assert scopes == needed | {"groups:history", "groups:read"}


def test_an_oauth_install_asks_for_the_manifests_scopes_and_comes_back_to_the_bot() -> None:
    """`/slack/install` asks Slack for exactly the manifest's bot scopes (and no user scope),
    and Slack sends the installer back to the path the bot serves."""
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())
    assert list(BOT_SCOPES) == manifest["oauth_config"]["scopes"]["bot"]
    assert "user" not in manifest["oauth_config"]["scopes"]
    [redirect] = manifest["oauth_config"]["redirect_urls"]
    assert redirect == "https://debatebot.example.com" + REDIRECT_PATH
