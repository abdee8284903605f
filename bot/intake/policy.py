"""The one place a debate's spec is decided: the deployment's defaults, the channel's settings
and what was asked, with each role's model written in (so the record says who spoke on what)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.intake.request import Ask
from bot.providers import INHERITS, ProviderRegistry, judge_model, role_models
from bot.settings import RoleModel, Settings, SettingsError
from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import DebateSource
from engine.catalog import ModelRetiredError, RetiredUse
from engine.models import (
    ADVERSARIAL_ROLES,
    DEFAULT_PROTOCOL,
    ContextDocument,
    DebateSpec,
    ModelSettings,
    Participant,
    Role,
    ThresholdSource,
)
from engine.protocols import definition_for

TRIAGED_SOURCES = frozenset(
    {DebateSource.ADR, DebateSource.LINK, DebateSource.UPLOAD, DebateSource.REACTION}
)
"""Triggers nobody typed a question for: in a channel with `triage` on, a cheap model first
asks whether they warrant a debate at all."""


def rounds_for(protocol: str, asked: int | None, configured: int) -> int:
    """A debate's round count: as asked, else the configured count (the channel's or the
    deployment's) for a protocol that takes it (`Flags.configured_rounds`), else the protocol's
    default; the others end by their own rule. An unknown protocol is a SpecError."""
    if asked is not None:
        return asked
    found = definition_for(protocol)
    return configured if found.flags.configured_rounds else found.default_rounds


def default_debaters(
    protocol: str, stances_for: Sequence[str], stances_against: Sequence[str]
) -> list[tuple[str, str | None, str | None]]:
    """(name, stance, role hint) of the debaters a protocol gets when the request names none:
    stances from --for/--against (named for-1, against-1, …), the protocol's own otherwise."""
    if stances_for or stances_against:
        return [
            (f"{side}-{n}", stance, None)
            for side, stances in (("for", stances_for), ("against", stances_against))
            for n, stance in enumerate(stances, 1)
        ]
    return [(d.name, d.stance, d.hint) for d in definition_for(protocol).default_debaters]


@dataclass(frozen=True)
class PlaceSettings:
    """What a place gives a request that did not say: a Slack channel's settings, or for a door
    with no place (the web page, the HTTP API, a terminal) the deployment's defaults, which a
    None here means."""

    protocol: str = DEFAULT_PROTOCOL
    rounds: int | None = None
    budget_usd: float | None = None
    threshold: float | None = None
    route: bool = False
    triage: bool = False

    @classmethod
    def of_channel(cls, row: ChannelSettings) -> PlaceSettings:
        """A channel's stored settings (or its defaults, when it has none stored)."""
        return cls(
            protocol=row.protocol,
            rounds=row.rounds,
            budget_usd=row.budget_usd,
            threshold=row.threshold,
            route=row.route,
            triage=row.triage,
        )


DEPLOYMENT_DEFAULTS = PlaceSettings()
"""The policy of a request with no place: every unset value is the deployment's."""


class SpecPolicy:
    """Builds specs under the deployment's settings and its providers' catalogue."""

    def __init__(self, settings: Settings, registry: ProviderRegistry) -> None:
        self.settings = settings
        self.registry = registry

    def models(
        self,
        provider: str | None = None,
        model: str | None = None,
        overrides: Mapping[str, RoleModel] | None = None,
    ) -> dict[str, ModelSettings]:
        """Every role's model under the settings and these overrides (see bot.providers)."""
        return role_models(
            self.settings,
            self.registry.catalog,
            provider=provider,
            model=model,
            overrides=overrides,
        )

    def for_place(
        self,
        place: PlaceSettings,
        ask: Ask,
        adopted: tuple[float, ThresholdSource] | None = None,
    ) -> DebateSpec:
        """The spec of `ask`, with `place`'s settings filling in what was not asked: its
        protocol, its adversarial round count, its budget and threshold (unset: the threshold
        the workspace `adopted` with its weights, else the deployment's), and its router for
        panels."""
        protocol = ask.protocol or place.protocol
        threshold, source = (
            (place.threshold, ThresholdSource.CHANNEL)
            if place.threshold is not None
            else adopted or (None, ThresholdSource.FIXED)
        )
        return self.spec(
            ask.question,
            context=ask.context,
            protocol=protocol,
            rounds=ask.rounds,
            default_rounds=place.rounds,
            budget_usd=ask.budget_usd if ask.budget_usd is not None else place.budget_usd,
            threshold=threshold,
            threshold_source=source,
            provider=ask.provider,
            model=ask.model,
            overrides=ask.overrides,
            stances_for=ask.stances_for,
            stances_against=ask.stances_against,
            route=ask.route or (place.route and definition_for(protocol).flags.takes_route),
            options=ask.options,
            judges=ask.judges,
        )

    def spec(
        self,
        question: str,
        *,
        context: Sequence[ContextDocument] = (),
        protocol: str = DEFAULT_PROTOCOL,
        rounds: int | None = None,
        default_rounds: int | None = None,
        budget_usd: float | None = None,
        threshold: float | None = None,
        threshold_source: ThresholdSource = ThresholdSource.FIXED,
        provider: str | None = None,
        model: str | None = None,
        overrides: Mapping[str, RoleModel] | None = None,
        stances_for: Sequence[str] = (),
        stances_against: Sequence[str] = (),
        route: bool = False,
        options: Mapping[str, Any] | None = None,
        judges: int | None = None,
    ) -> DebateSpec:
        """A spec with the deployment's defaults and each role's model written into it.
        `default_rounds` is the channel's adversarial round count; `route` gives a panel its
        fast-model router (the framing model); `judges` the independent judges (default
        `DEBATEBOT_JUDGES`), each on `judge_model`'s choice. Raises pydantic's ValidationError
        on bad input and SettingsError on a bad or retired model configuration."""
        models = self.models(provider, model, overrides)
        try:
            self.registry.refuse_retired(models)
        except ModelRetiredError as error:
            raise SettingsError(
                retired_advice(
                    error, model=model, overrides=overrides, configured=self.settings.roles
                )
            ) from error
        debaters = [
            Participant(
                role=Role.DEBATER,
                name=name,
                stance=stance,
                role_hint=hint,
                model=models["debaters"],
            )
            for name, stance, hint in default_debaters(protocol, stances_for, stances_against)
        ]
        router = [Participant(role=Role.ROUTER, model=models["framing"])] if route else []
        count = judges if judges is not None else self.settings.judges
        judge = judge_model(
            self.settings,
            self.registry.catalog,
            models[definition_for(protocol).deciding_slot],
            models["debaters"],
        )
        independent = [
            Participant(role=Role.INDEPENDENT_JUDGE, name=f"judge-{n}", model=judge)
            for n in range(1, count + 1)
        ]
        return DebateSpec(
            question=question,
            protocol=protocol,
            context=list(context),
            max_rounds=rounds_for(protocol, rounds, default_rounds or self.settings.rounds),
            options=dict(options or {}),
            budget_usd=budget_usd if budget_usd is not None else self.settings.budget_usd,
            escalation_threshold=(
                threshold if threshold is not None else self.settings.escalation_threshold
            ),
            threshold_source=threshold_source if threshold is not None else ThresholdSource.FIXED,
            judges=count,
            participants=[
                *(Participant(role=role, model=models[role.value]) for role in ADVERSARIAL_ROLES),
                Participant(role=Role.JUDGE, model=models["judge"]),
                Participant(role=Role.SYNTHESIZER, model=models["judge"]),
                Participant(role=Role.TRIAGE, model=models["framing"]),
                *debaters,
                *router,
                *independent,
            ],
            default_model=models["debaters"],
        )


def retired_advice(
    error: ModelRetiredError,
    *,
    model: str | None = None,
    overrides: Mapping[str, RoleModel] | None = None,
    configured: Mapping[str, RoleModel] | None = None,
) -> str:
    """The refusal of retired models, each with its replacement given the way the person chose
    the model: the role flag they used (`--moderator`), else the role's setting (`configured`,
    DEBATEBOT_ROLES__…), else `--model`, else the deployment's (DEBATEBOT_MODEL)."""
    if not error.uses:
        return str(error)
    return (
        "; ".join(_retired_use(use, model, overrides or {}, configured or {}) for use in error.uses)
        + ". Nothing was sent to the model."
    )


def _chosen_by(roles: Sequence[str], slots: Mapping[str, RoleModel]) -> list[str]:
    """The role slots among `slots` that named the model of one of `roles` (its own slot, or
    the slot it inherits from)."""
    found = (
        slot
        for role in roles
        for slot in (role, INHERITS.get(role))
        if slot is not None and (chosen := slots.get(slot)) is not None and chosen.model
    )
    return list(dict.fromkeys(found))


def _retired_use(
    use: RetiredUse,
    model: str | None,
    overrides: Mapping[str, RoleModel],
    configured: Mapping[str, RoleModel],
) -> str:
    new = use.replacement or "a current model (`debatebot models` lists them)"
    if flags := _chosen_by(use.roles, overrides):
        how = ", ".join(f"`--{slot} {use.provider}:{new}`" for slot in flags)
    elif settings := _chosen_by(use.roles, configured):
        # A role's setting wins over --model (bot.providers.role_models).
        how = ", ".join(f"DEBATEBOT_ROLES__{slot.upper()}__MODEL={new}" for slot in settings)
    elif model:
        how = f"`--model {new}`"
    else:
        how = f"DEBATEBOT_MODEL={new}"
    when = f" on {use.retired_on}" if use.retired_on else ""
    return (
        f"{use.provider}:{use.model} was retired{when} and no longer answers (used by:"
        f" {', '.join(use.roles)}); use {new} instead: {how}"
    )
