"""`debatebot models`: every role's model, its lifecycle and its price; and the role overrides
the `run` and `eval` options give."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.providers import KEY_VARIABLES
from bot.settings import ROLE_SLOTS, RoleModel, Settings, SettingsError
from bot.wiring import (
    build_services,
)
from engine.catalog import Lifecycle, ModelRetiredError, lifecycle_notes
from engine.errors import EngineError

if TYPE_CHECKING:
    pass


def role_overrides(args: argparse.Namespace) -> dict[str, RoleModel]:
    return {
        role: RoleModel.parse(value)
        for role in ROLE_SLOTS
        if (value := getattr(args, f"role_{role}", None))
    }


def models(args: argparse.Namespace) -> int:
    """Print every role's model with its lifecycle status, price and whether its provider's
    key is present, a warning per deprecated model, then the catalogue's current models of
    each hosted provider in use. Exit 1 when a key is missing or a model is retired."""
    settings = Settings()
    services = build_services(settings)
    models = services.policy.models(args.provider, args.model, role_overrides(args))
    registry = services.registry
    catalog = registry.catalog
    today = registry.today()
    # As wide as the longest name: the local model's is its file and hash (about 60 wide).
    width = max(40, *(len(f"{m.provider}:{m.model}") for m in models.values()))
    print(
        f"{'role':<10} {'provider:model':<{width}} {'status':<28} {'effort':<7} {'max tok':>7}"
        "  price in/out USD/MTok"
    )
    unpriced = False
    for role, chosen in models.items():
        try:
            price = registry.pricing(chosen.provider, chosen.model)
            priced = f"{price.input_per_mtok:g} / {price.output_per_mtok:g}"
        except EngineError:
            priced, unpriced = "NO PRICE (add to DEBATEBOT_PRICES)", True
        entry = catalog.find(chosen.provider, chosen.model)
        if entry is not None:
            status = entry.status(today)
        elif chosen.provider in ("openai", "anthropic"):
            status = "not in the catalogue"
        else:
            status = "runs here" if chosen.provider in ("local", "fake") else "your server's"
        name = f"{chosen.provider}:{chosen.model}"
        print(
            f"{role:<10} {name:<{width}} {status:<28} {chosen.effort or '-':<7}"
            f" {chosen.max_tokens:>7}  {priced}"
        )
    print()
    failed = unpriced
    try:
        for note in lifecycle_notes(catalog, models, today=today).values():
            print(f"warning: {note}")
    except ModelRetiredError as error:
        failed = True
        print(f"RETIRED: {error}")
    for provider in dict.fromkeys(m.provider for m in models.values()):
        variable = KEY_VARIABLES.get(provider)
        if provider == "openai-compatible":
            state = f"base URL {settings.openai_compatible_base_url or 'NOT SET'}"
        elif variable is None:
            state = "no key needed"
        else:
            try:
                settings.provider_key(provider)
                state = f"key present ({variable})"
            except SettingsError as error:
                failed = True
                state = f"KEY MISSING: {error}"
        print(f"{provider:<18} {state}")
    for provider in dict.fromkeys(m.provider for m in models.values()):
        current = [e for e in catalog.of(provider) if e.lifecycle(today) is Lifecycle.CURRENT]
        if not current:
            continue
        print(f"\ncurrent {provider} models (catalogue; USD per million tokens in / out):")
        for entry in current:
            roles = f"  default for {', '.join(entry.default_roles)}" if entry.default_roles else ""
            price = entry.prices
            prices = f"{price.input_per_mtok:g} / {price.output_per_mtok:g}"
            print(
                f"  {entry.id:<22} {prices:<12} released {entry.released or '?'},"
                f" checked {entry.checked}{roles}"
            )
    return 1 if failed else 0
