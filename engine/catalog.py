"""The model catalogue: one entry per hosted model, the only place model facts are kept.

An entry says who serves the model (`provider`, `id`, `aliases`), what it costs (`prices`), how
it gives structured output (`structured`, strictest first), what a request may carry
(`temperature`, `thinking`, `efforts`, `default_max_tokens`) and where it is in its life
(`released`, `deprecated_on`, `retires_on`, `replacement`), with the `source` each fact came
from and the day it was `checked`. Defaults, pricing, request building, the lifecycle checks
and `debatebot models` all read it (in the style of one registry entry per model).

The shipped entries are `engine/data/models.json`. A deployment adds or replaces entries with a
catalogue file of its own (same shape) and prices with `DEBATEBOT_PRICES`. A model the
catalogue does not know is still usable: its provider falls back to what that vendor's newest
models accept, and a price must be given before a paid model runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.errors import LLMError
from engine.models import Effort, ModelSettings
from engine.pricing import Pricing, missing_price
from engine.providers.schemas import StructuredMode

EFFORTS: tuple[str, ...] = get_args(Effort)
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


class Lifecycle(StrEnum):
    CURRENT = "current"
    DEPRECATED = "deprecated"
    """Still served, with a retirement announced or the vendor calling it deprecated."""
    RETIRED = "retired"
    """No longer served: a request fails."""


class Thinking(StrEnum):
    """Whether the model thinks before it answers (Anthropic's thinking, OpenAI's reasoning)."""

    ALWAYS = "always"
    """It always may: it cannot be turned off (Claude Opus 5.5 refuses `disabled`), an effort
    level steers how much. Anthropic's request says `{"type": "adaptive"}`."""
    OPTIONAL = "optional"
    """Off unless asked for; debatebot leaves it off."""
    NONE = "none"


class CatalogError(LLMError):
    """A catalogue file that cannot be read, or an entry that contradicts itself."""


@dataclass(frozen=True)
class RetiredUse:
    """A retired model some roles were given: when it retired and what replaces it."""

    provider: str
    model: str
    retired_on: date | None
    replacement: str | None
    roles: tuple[str, ...]


class ModelRetiredError(CatalogError):
    """A model its vendor no longer serves: refused before any request, so nothing is paid.
    `uses` says which, so a caller that knows how each role's model was chosen (a flag, a
    setting) can name that in its advice."""

    def __init__(self, message: str, uses: Sequence[RetiredUse] = ()) -> None:
        super().__init__(message)
        self.uses = tuple(uses)


class ModelEntry(BaseModel):
    """One hosted model, as its vendor documents it."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    id: str
    aliases: list[str] = Field(default_factory=list)
    prices: Pricing
    structured: list[StructuredMode] = Field(min_length=1)
    temperature: bool
    """Whether it takes a sampling temperature at its default settings (a reasoning model that
    offers effort `none` takes one only with it)."""
    thinking: Thinking
    efforts: list[str] = Field(default_factory=list)
    default_max_tokens: int | None = Field(default=None, ge=16)
    """Output tokens a call may use when no role sets it: thinking counts against them."""
    default_roles: list[str] = Field(default_factory=list)
    """The role slots (`debaters`, `moderator`) whose default this model is for its provider."""
    released: date | None = None
    deprecated_on: date | None = None
    retires_on: date | None = None
    replacement: str | None = None
    source: str = Field(min_length=1)
    checked: date

    @model_validator(mode="after")
    def _consistent(self) -> ModelEntry:
        unknown = [effort for effort in self.efforts if effort not in EFFORTS]
        if unknown:
            raise ValueError(f"{self.id}: unknown effort level(s) {unknown}; levels are {EFFORTS}")
        if (self.deprecated_on or self.retires_on) and not self.replacement:
            raise ValueError(f"{self.id}: a deprecated or retiring model must name its replacement")
        return self

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.id}"

    def names(self) -> list[str]:
        return [self.id, *self.aliases]

    def lifecycle(self, today: date) -> Lifecycle:
        if self.retires_on is not None and self.retires_on <= today:
            return Lifecycle.RETIRED
        if self.retires_on is not None or (
            self.deprecated_on is not None and self.deprecated_on <= today
        ):
            return Lifecycle.DEPRECATED
        return Lifecycle.CURRENT

    def status(self, today: date) -> str:
        """`current`, `deprecated until DATE` or `retired on DATE`, as people read it."""
        state = self.lifecycle(today)
        if state is Lifecycle.RETIRED:
            return f"retired on {self.retires_on}"
        if state is Lifecycle.DEPRECATED:
            return f"deprecated until {self.retires_on}" if self.retires_on else "deprecated"
        return "current"


EFFORT_SETTING = "DEBATEBOT_ROLES__<ROLE>__EFFORT"


def check_effort(
    entry: ModelEntry | None, effort: Effort | None, *, setting: str = EFFORT_SETTING
) -> None:
    """Refuse, before any request, a role's effort its catalogued model does not list: the
    vendor would answer it with a 400, and dropping it would run the role at another effort
    than the one set. A model the catalogue does not know is left to its server."""
    if entry is None or effort is None or effort in entry.efforts:
        return
    where = f"{entry.provider} model {entry.id}"
    if not entry.efforts:
        raise LLMError(
            f"{where} takes no effort level, not {effort!r}: remove {setting} for the roles"
            " on this model"
        )
    raise LLMError(
        f"{where} takes the effort levels {', '.join(entry.efforts)}, not {effort!r}: set"
        f" {setting} to one of them, or remove it to use the model's default"
    )


class Catalog:
    """The entries by provider and name (id, alias, or a dated id of a listed one), and price
    overrides that win over the entries' own prices."""

    def __init__(
        self, entries: Iterable[ModelEntry], *, prices: Mapping[str, Pricing] | None = None
    ) -> None:
        self.entries: list[ModelEntry] = []
        self._by_name: dict[tuple[str, str], ModelEntry] = {}
        for entry in entries:
            self.add(entry)
        self.prices = dict(prices or {})

    def add(self, entry: ModelEntry) -> None:
        """Add `entry`, replacing an entry of the same provider and id."""
        self.entries = [e for e in self.entries if (e.provider, e.id) != (entry.provider, entry.id)]
        self.entries.append(entry)
        self._by_name = {(e.provider, name): e for e in self.entries for name in e.names()}

    @classmethod
    def load(
        cls, path: Path | None = None, *, prices: Mapping[str, Pricing] | None = None
    ) -> Catalog:
        """The shipped catalogue, with the entries of the file at `path` added (same provider
        and id: replaced), and `prices` over every price."""
        catalog = cls(_read(None), prices=prices)
        if path is not None:
            for entry in _read(path):
                catalog.add(entry)
        return catalog

    def find(self, provider: str, model: str) -> ModelEntry | None:
        """The entry of `provider:model` by id or alias, or of the listed model a dated id
        (`claude-opus-4-5-20251101`, `gpt-4.1-2025-04-14`) is a snapshot of."""
        found = self._by_name.get((provider, model))
        if found is None and (undated := _DATE_SUFFIX.sub("", model)) != model:
            found = self._by_name.get((provider, undated))
        return found

    def price(self, provider: str, model: str) -> Pricing | None:
        """The price of `provider:model`: an override (exact, or of the undated id), else the
        catalogue's."""
        for name in (model, _DATE_SUFFIX.sub("", model)):
            if f"{provider}:{name}" in self.prices:
                return self.prices[f"{provider}:{name}"]
        entry = self.find(provider, model)
        return entry.prices if entry is not None else None

    def require_price(self, provider: str, model: str) -> Pricing:
        """The price of a paid model; without one the budget could not be kept, so refuse."""
        found = self.price(provider, model)
        if found is None:
            raise missing_price(provider, model)
        return found

    def provider_of(self, model: str) -> str | None:
        """The one provider whose catalogue entries name `model`, if exactly one does."""
        providers = {e.provider for e in self.entries if e.id == model or model in e.aliases}
        if not providers and (undated := _DATE_SUFFIX.sub("", model)) != model:
            return self.provider_of(undated)
        return providers.pop() if len(providers) == 1 else None

    def of(self, provider: str) -> list[ModelEntry]:
        return [e for e in self.entries if e.provider == provider]

    def default_for(self, provider: str, slot: str) -> ModelEntry | None:
        return next((e for e in self.of(provider) if slot in e.default_roles), None)


def _read(path: Path | None) -> list[ModelEntry]:
    where = path or "the shipped engine/data/models.json"
    try:
        if path is None:
            text = resources.files("engine.data").joinpath("models.json").read_text("utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        return [ModelEntry.model_validate(item) for item in raw["models"]]
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as error:
        raise CatalogError(
            f"cannot read the model catalogue {where}: {error}. It must be a JSON object"
            ' {"models": [{"provider": …, "id": …, "prices": {…}, "structured": […],'
            ' "temperature": …, "thinking": …, "source": …, "checked": "YYYY-MM-DD"}, …]}'
        ) from error


def lifecycle_notes(
    catalog: Catalog, models: Mapping[str, ModelSettings], *, today: date
) -> dict[str, str]:
    """A warning per deprecated model among `models` (role -> model), keyed `provider:model`,
    naming its retirement date, its replacement and the roles that use it. Raises
    ModelRetiredError naming every retired one, its replacement and how to choose it, before
    anything is asked of a model."""
    users: dict[tuple[str, str], list[str]] = {}
    for role, chosen in models.items():
        users.setdefault((chosen.provider, chosen.model), []).append(role)
    notes: dict[str, str] = {}
    retired: list[str] = []
    uses: list[RetiredUse] = []
    for (provider, model), roles in users.items():
        entry = catalog.find(provider, model)
        if entry is None:
            continue
        state = entry.lifecycle(today)
        used_by = ", ".join(roles)
        if state is Lifecycle.RETIRED:
            uses.append(
                RetiredUse(provider, model, entry.retires_on, entry.replacement, tuple(roles))
            )
            retired.append(
                f"{provider}:{model} was retired on {entry.retires_on} and no longer answers"
                f" (used by: {used_by}); use {entry.replacement} instead (`debatebot run"
                f" --model {entry.replacement}`, or for the deployment"
                f" DEBATEBOT_MODEL={entry.replacement}, or for one role"
                f" DEBATEBOT_ROLES__<ROLE>__MODEL={entry.replacement})"
            )
        elif state is Lifecycle.DEPRECATED:
            until = f"retires on {entry.retires_on}" if entry.retires_on else "is deprecated"
            notes[f"{provider}:{model}"] = (
                f"{provider}:{model} {until} (used by: {used_by}); move to {entry.replacement}"
                f" before then (`debatebot models --provider {provider}` lists current models)"
            )
    if retired:
        raise ModelRetiredError("; ".join(retired) + ". Nothing was sent to the model.", uses)
    return notes
