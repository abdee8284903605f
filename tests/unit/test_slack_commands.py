"""`/debate` text parsing, channel setting values, ADR recognition and Slack secrets."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.adr import adr_title, is_adr
from bot.settings import Settings, SettingsError
from bot.slack.command_text import (
    CancelCommand,
    Command,
    ConfigCommand,
    DebateCommand,
    HelpCommand,
    OpenDebateModal,
    parse_command,
    parse_people,
    parse_threshold,
)
from bot.slack.errors import CommandError

PROTOCOLS = ("adversarial", "stances")


def parse(text: str) -> Command:
    return parse_command(text, protocols=PROTOCOLS)


def test_question_with_flags_anywhere_keeps_its_words_and_apostrophes() -> None:
    command = parse("--rounds 2 Shouldn't we drop Redis? It's \"slow\" --budget $0.50")
    assert command == DebateCommand(
        question="Shouldn't we drop Redis? It's \"slow\"", rounds=2, budget_usd=0.5
    )


def test_stances_take_quoted_values_straight_or_curly() -> None:
    command = parse(
        "Which store? --protocol stances --for \u201ckeep Postgres\u201d --against 'move to Dynamo'"
        " --for=SQLite"
    )
    assert isinstance(command, DebateCommand)
    assert command.stances_for == ("keep Postgres", "SQLite")
    assert command.stances_against == ("move to Dynamo",)


def test_an_em_dash_counts_as_a_double_dash() -> None:
    command = parse("Adopt it? \u2014rounds 3")
    assert isinstance(command, DebateCommand)
    assert command.rounds == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Q? --rounds", "--rounds needs a value"),
        ("Q? --rounds 0", "at least 1"),
        ("Q? --rounds 2 --rounds 3", "more than once"),
        ("Q? --budget free", "US dollars"),
        ("Q? --budget 1000", "at most $100"),
        ("Q? --protocol chess", "unknown protocol `chess`; available: adversarial, stances"),
        ("Q? --for yes", "need `--protocol stances`"),
        ("Q? --verbose yes", "unknown option `--verbose`"),
        ("--rounds 2", "there is no question"),
    ],
)
def test_bad_flags_say_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("$", r"\$").replace("?", r"\?")):
        parse(text)


def test_subcommands() -> None:
    assert parse("") == OpenDebateModal()
    assert parse("   ") == OpenDebateModal()
    assert parse("help") == HelpCommand()
    assert parse("config") == ConfigCommand("modal")
    assert parse("config show") == ConfigCommand("show")
    assert parse("config set threshold 70%") == ConfigCommand("set", {"threshold": 0.7})
    assert parse("config set budget none") == ConfigCommand("set", {"budget_usd": None})
    assert parse("config set adr on") == ConfigCommand("set", {"adr_watch": True})
    assert parse("config set reaction :mag:") == ConfigCommand("set", {"trigger_reaction": "mag"})
    # Questions that merely start with the words stay questions.
    assert isinstance(parse("help me choose a queue"), DebateCommand)
    assert isinstance(parse("config files in git or in vault?"), DebateCommand)


def test_config_set_errors() -> None:
    with pytest.raises(CommandError, match="unknown setting `colour`"):
        parse("config set colour red")
    with pytest.raises(CommandError, match="needs a value"):
        parse("config set rounds")


def test_people_from_mentions_groups_and_ids() -> None:
    assert parse_people("<@U123ABC|alice>, <!subteam^S0PS12|@ops> W99999999") == [
        "U123ABC",
        "W99999999",
        "S0PS12",
    ]
    assert parse_people("none") == []
    with pytest.raises(CommandError, match="could not read `bob`"):
        parse_people("bob")


def test_threshold_forms() -> None:
    assert parse_threshold("0.65") == 0.65
    assert parse_threshold("65%") == 0.65
    assert parse_threshold("65") == 0.65
    with pytest.raises(CommandError):
        parse_threshold("-1")


@pytest.mark.parametrize(
    "text",
    [
        "ADR-012: Use Kafka for events\nWe will...",
        "# ADR 7 - Retire the monolith",
        "*ADR: Move sessions to Redis*",
        "Retire cron\n\n## Context\nx\n## Decision\ny\n## Consequences\nz",
        "Title\n*Context:*\nx\n*Decision:*\ny\n*Consequences:*\nz",
    ],
)
def test_adrs_are_recognised(text: str) -> None:
    assert is_adr(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "adrenaline rush after the launch",
        "ADRIAN, can you look at this?",
        "Some context and a decision with consequences, all in one line",
        "## Context\nx\n## Decision\ny",
    ],
)
def test_non_adrs_are_not(text: str) -> None:
    assert not is_adr(text)


def test_adr_title_strips_markdown() -> None:
    assert adr_title("\n## ADR-3: Use Kafka  \nbody") == "ADR-3: Use Kafka"
    assert adr_title("*ADR-3: Use Kafka*") == "ADR-3: Use Kafka"


def test_slack_secrets_are_required_and_placeholders_refused() -> None:
    with pytest.raises(SettingsError, match="DEBATEBOT_SLACK_BOT_TOKEN is not set"):
        Settings(slack_signing_secret=SecretStr("0123456789abcdef")).slack_secrets()
    with pytest.raises(SettingsError, match="DEBATEBOT_SLACK_BOT_TOKEN holds a placeholder"):
        Settings(slack_bot_token=SecretStr("xoxb-your-token-here")).slack_secrets()
    with pytest.raises(SettingsError, match="should start with 'xoxb-'"):
        Settings(slack_bot_token=SecretStr("xoxp-1234567890-abc")).slack_secrets()
    with pytest.raises(SettingsError, match="DEBATEBOT_SLACK_SIGNING_SECRET holds a placeholder"):
        Settings(
            slack_bot_token=SecretStr("xoxb-1234-5678-real"),
            slack_signing_secret=SecretStr("changeme"),
        ).slack_secrets()


def test_socket_mode_needs_no_signing_secret() -> None:
    settings = Settings(
        slack_bot_token=SecretStr("xoxb-1234-5678-real"),
        slack_app_token=SecretStr("xapp-1-A1-123-abcdef"),
    )
    assert settings.slack_secrets() == ("xoxb-1234-5678-real", None, "xapp-1-A1-123-abcdef")
    assert "xoxb" not in repr(settings)


def test_cancel_takes_one_debate_number_and_a_longer_text_stays_a_question() -> None:
    assert parse("cancel 42") == CancelCommand(42)
    assert parse("CANCEL #7") == CancelCommand(7)
    assert isinstance(parse("cancel the Redis migration?"), DebateCommand)
    for text in ("cancel", "cancel abc"):
        with pytest.raises(CommandError, match="needs the number of the debate"):
            parse(text)
