"""A channel's unset rounds and threshold are the deployment's (DEBATEBOT_ROUNDS,
DEBATEBOT_ESCALATION_THRESHOLD): a channel with settings of its own still follows them, one
that sets its own keeps it, and `default` or an empty form field returns to them."""

from __future__ import annotations

from bot.intake.policy import DEPLOYMENT_DEFAULTS, PlaceSettings, SpecPolicy
from bot.intake.request import Ask
from bot.providers import ProviderRegistry
from bot.settings import Settings
from bot.slack.command_text import parse_config_form, parse_setting
from bot.slack.listeners.commands import settings_text
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from engine.models import ThresholdSource

PROTOCOLS = ("adversarial", "panel")


def policy(settings: Settings) -> SpecPolicy:
    return SpecPolicy(settings, ProviderRegistry(settings))


def test_a_channel_with_settings_of_its_own_follows_the_deployments_threshold_and_rounds() -> None:
    deployment = Settings(provider="fake", escalation_threshold=0.8, rounds=2)
    channel = ChannelSettings(channel_id="C1", reviewers=["U1"], budget_usd=1.0)

    spec = policy(deployment).for_place(PlaceSettings.of_channel(channel), Ask("Adopt ADR-7?"))

    assert (spec.escalation_threshold, spec.max_rounds) == (0.8, 2)


def test_a_channels_own_threshold_and_rounds_win() -> None:
    deployment = Settings(provider="fake", escalation_threshold=0.8, rounds=2)
    channel = ChannelSettings(channel_id="C1", threshold=0.5, rounds=3)

    spec = policy(deployment).for_place(PlaceSettings.of_channel(channel), Ask("Adopt ADR-7?"))

    assert (spec.escalation_threshold, spec.max_rounds) == (0.5, 3)


def test_default_returns_a_setting_to_the_deployments() -> None:
    assert parse_setting("threshold", "default", protocols=PROTOCOLS) == ("threshold", None)
    assert parse_setting("rounds", "DEFAULT", protocols=PROTOCOLS) == ("rounds", None)
    assert parse_setting("threshold", "70%", protocols=PROTOCOLS) == ("threshold", 0.7)


def test_an_empty_form_field_is_unset_and_shown_with_the_deployments_value() -> None:
    view = {
        "state": {
            "values": {
                "protocol": {
                    "value": {"type": "static_select", "selected_option": {"value": "panel"}}
                },
                "reaction": {"value": {"type": "plain_text_input", "value": "scales"}},
                "rounds": {"value": {"type": "plain_text_input", "value": None}},
                "threshold": {"value": {"type": "plain_text_input", "value": ""}},
            }
        }
    }

    values = parse_config_form(view, protocols=PROTOCOLS)

    assert (values["protocol"], values["rounds"], values["threshold"]) == ("panel", None, None)
    shown = settings_text(
        ChannelSettings(channel_id="C1"), ChannelDefaults(rounds=2, threshold=0.8)
    )
    assert "rounds 2 (default) \u00b7 threshold 0.8 (default)" in shown
    shown = settings_text(
        ChannelSettings(channel_id="C1", rounds=3, threshold=0.5),
        ChannelDefaults(rounds=2, threshold=0.8),
    )
    assert "rounds 3 \u00b7 threshold 0.5 \u00b7" in shown


def test_the_workspaces_adopted_threshold_applies_where_the_channel_sets_none() -> None:
    deployment = Settings(provider="fake", escalation_threshold=0.8)
    adopted = (0.69, ThresholdSource.GUARANTEED)

    unset = PlaceSettings.of_channel(ChannelSettings(channel_id="C1"))
    set_ = PlaceSettings.of_channel(ChannelSettings(channel_id="C1", threshold=0.5))
    plain = policy(deployment).for_place(unset, Ask("Adopt ADR-7?"))
    chosen = policy(deployment).for_place(unset, Ask("Adopt ADR-7?"), adopted)
    own = policy(deployment).for_place(set_, Ask("Adopt ADR-7?"), adopted)
    # A door with no place (the web page, the API, a terminal) takes the adopted one too.
    nowhere = policy(deployment).for_place(DEPLOYMENT_DEFAULTS, Ask("Adopt ADR-7?"), adopted)
    assert (nowhere.escalation_threshold, nowhere.threshold_source) == (
        0.69,
        ThresholdSource.GUARANTEED,
    )

    assert (plain.escalation_threshold, plain.threshold_source) == (0.8, ThresholdSource.FIXED)
    assert (chosen.escalation_threshold, chosen.threshold_source) == (
        0.69,
        ThresholdSource.GUARANTEED,
    )
    assert (own.escalation_threshold, own.threshold_source) == (0.5, ThresholdSource.CHANNEL)
