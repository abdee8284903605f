"""The options added for the panel router and review channels, the debate and settings forms
(parsed next to `/debate`'s text), and the per-turn "who is speaking" line."""

from __future__ import annotations

from typing import Any

import pytest

from bot.intake.policy import rounds_for
from bot.messages.transcript import progress
from bot.slack.command_text import (
    DebateCommand,
    parse_command,
    parse_config_form,
    parse_debate_form,
    parse_setting,
)
from bot.slack.errors import CommandError, FormError
from engine.events import TurnStarted
from engine.models import DebateSpec, Role

PROTOCOLS = ("adversarial", "stances", "panel")


def parse(text: str) -> Any:
    return parse_command(text, protocols=PROTOCOLS)


def test_route_is_a_switch_for_panels_that_leaves_the_question_whole() -> None:
    command = parse("--route Which cache should pricing use? --protocol panel")
    assert command == DebateCommand(
        question="Which cache should pricing use?", protocol="panel", route=True
    )
    with pytest.raises(CommandError, match="--protocol panel"):
        parse("Which cache? --route")
    with pytest.raises(CommandError, match="takes no value"):
        parse("Which cache? --protocol panel --route=yes")


def test_review_in_takes_a_channel_mention_or_id() -> None:
    assert parse("Adopt it? --review-in <#C0REVIEW|arch>").review_in == "C0REVIEW"
    assert parse("Adopt it? --review-in C0REVIEW2").review_in == "C0REVIEW2"
    with pytest.raises(CommandError, match="not a channel"):
        parse("Adopt it? --review-in arch-reviews")


def test_triage_and_route_are_channel_settings() -> None:
    assert parse_setting("triage", "on", protocols=PROTOCOLS) == ("triage", True)
    assert parse_setting("route", "off", protocols=PROTOCOLS) == ("route", False)


def form(**values: Any) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for block_id, value in values.items():
        if isinstance(value, list):
            action: dict[str, Any] = {
                "type": "checkboxes",
                "selected_options": [{"value": v} for v in value],
            }
        elif block_id == "protocol":
            action = {"type": "static_select", "selected_option": {"value": value}}
        else:
            action = {"type": "plain_text_input", "value": value}
        state[block_id] = {"value": action}
    return {"state": {"values": state}}


def test_the_debate_form_names_every_field_to_fix() -> None:
    with pytest.raises(FormError) as raised:
        parse_debate_form(
            form(
                question="",
                protocol="adversarial",
                rounds="x",
                budget="-1",
                route=["on"],
                stances_for="keep it",
            ),
            protocols=PROTOCOLS,
        )
    assert set(raised.value.errors) == {"question", "rounds", "budget", "route", "stances_for"}


def test_the_debate_form_gives_the_command_it_asks_for() -> None:
    command = parse_debate_form(
        form(question="Adopt it?", protocol="panel", rounds="2", route=["on"]),
        protocols=PROTOCOLS,
    )
    assert command == DebateCommand(question="Adopt it?", protocol="panel", rounds=2, route=True)


def test_the_settings_form_reads_its_switches() -> None:
    values = parse_config_form(
        form(
            protocol="panel",
            rounds="1",
            threshold="0.7",
            reviewers="<@U1>",
            owners="",
            budget="",
            reaction="scales",
            adr=["on", "triage"],
        ),
        protocols=PROTOCOLS,
    )
    assert (values["adr_watch"], values["triage"], values["route"]) == (True, True, False)
    with pytest.raises(FormError) as raised:
        parse_config_form(
            form(protocol="nope", rounds="0", threshold="high", reaction="no way"),
            protocols=PROTOCOLS,
        )
    assert set(raised.value.errors) == {"protocol", "rounds", "threshold", "reaction"}


def test_rounds_are_decided_in_one_place() -> None:
    assert rounds_for("adversarial", None, 2) == 2
    assert rounds_for("adversarial", 3, 2) == 3
    assert rounds_for("panel", None, 2) == 3, "a channel's count is an adversarial one"
    assert rounds_for("consensus", 4, 2) == 4


@pytest.mark.parametrize(
    ("protocol", "role", "speaker", "step", "expected"),
    [
        (
            "adversarial",
            Role.CRITIC,
            "",
            "",
            "critic is challenging the proposal \u00b7 round 1 of 2",
        ),
        ("adversarial", Role.FRAMING, "", "", "framing is turning the question into a proposition"),
        (
            "consensus",
            Role.DEBATER,
            "ana",
            "speaking in the critique phase",
            "ana is speaking in the critique phase \u00b7 round 1 of 2",
        ),
        (
            "structured",
            Role.DEBATER,
            "pro",
            "cross-examining",
            "pro is cross-examining \u00b7 phase 1 of 4",
        ),
        ("panel", Role.JUDGE, "", "", "judge is scoring the arguments \u00b7 round 1 of 2"),
        ("adversarial", Role.TRIAGE, "", "", "checking whether this needs a debate"),
    ],
)
def test_the_parent_says_who_is_speaking(
    protocol: str, role: Role, speaker: str, step: str, expected: str
) -> None:
    spec = DebateSpec(question="Adopt it?", protocol=protocol, max_rounds=2)
    event = TurnStarted(
        round=0 if role is Role.FRAMING else 1,
        role=role,
        speaker=speaker,
        step=step,
        attempt=1,
        provider="fake",
        model="fake-model",
    )
    assert progress(event, spec)[1] == expected
