"""Which model speaks for each role, and the provider objects behind them.

Precedence for one role, highest first: a command-line override (`--moderator anthropic:MODEL`),
the role's settings (`DEBATEBOT_ROLES__MODERATOR__…`), the slot it inherits from (proposer,
critic, rebuttal and framing inherit `debaters`; judge inherits `moderator`), then the provider's
default set. The moderator and judge default to the other model family when the debaters run on
OpenAI or Anthropic and the other family's key is configured, so that the judge does not share the
debaters' blind spots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from bot.settings import ROLE_SLOTS, START_PROVIDER_CONCURRENCY, RoleModel, Settings, SettingsError
from engine.catalog import (
    Catalog,
    ModelRetiredError,
    check_effort,
    lifecycle_notes,
)
from engine.errors import ProviderUnavailableError
from engine.llm import LLM
from engine.models import ModelSettings
from engine.pricing import FREE, Pricing, read_prices
from engine.providers.limiter import ModelLimits
from engine.providers.local import served_model
from engine.providers.retry import RetryPolicy
from engine.providers.schemas import StructuredMode

PROVIDERS = ("local", "openai", "anthropic", "openai-compatible", "fake")
LOCAL_MODELS = {"fake": "fake-model"}
"""The one model of each provider that runs in this process (the local provider's is its file,
`local_model`; hosted defaults are the model catalogue's `default_roles`)."""
FALLBACK_MAX_TOKENS = 1024
"""Output tokens a call may use when neither the role, the settings nor the catalogue say."""
INHERITS = {
    "framing": "debaters",
    "proposer": "debaters",
    "critic": "debaters",
    "rebuttal": "debaters",
    "judge": "moderator",
}
JUDGING = frozenset({"moderator", "judge"})
OTHER_FAMILY = {"openai": "anthropic", "anthropic": "openai"}
KEY_VARIABLES = {
    "openai": "DEBATEBOT_OPENAI_API_KEY",
    "anthropic": "DEBATEBOT_ANTHROPIC_API_KEY",
    "openai-compatible": "DEBATEBOT_OPENAI_COMPATIBLE_API_KEY",
}


SLOT_OF = {"debater": "debaters", "synthesizer": "judge", "triage": "framing", "router": "framing"}
"""The role slot whose settings a participant's role takes (`bot.intake.policy.SpecPolicy.spec`)."""


def effort_setting(role: str) -> str:
    """The variable that sets the effort of `role` (a slot or a participant's role)."""
    return f"DEBATEBOT_ROLES__{SLOT_OF.get(role, role).upper()}__EFFORT"


def _check_provider(name: str, where: str) -> None:
    if name not in PROVIDERS:
        raise SettingsError(
            f"{where}: unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}"
        )


def _merge(*layers: RoleModel | None) -> RoleModel:
    """Later layers win, field by field."""
    merged: dict[str, object] = {}
    for layer in layers:
        if layer is not None:
            merged.update(layer.model_dump(exclude_none=True))
    return RoleModel.model_validate(merged)


def _has_key(settings: Settings, provider: str) -> bool:
    secret = {"openai": settings.openai_api_key, "anthropic": settings.anthropic_api_key}.get(
        provider
    )
    return secret is not None and bool(secret.get_secret_value().strip())


def default_model(settings: Settings, catalog: Catalog, provider: str, role: str) -> str:
    """The provider's default model for `role`: the catalogue entry marked for the role's slot
    (the judge's is the moderator's, the debating roles' the debaters')."""
    if provider == "openai-compatible":
        if not settings.openai_compatible_model:
            raise SettingsError(
                "DEBATEBOT_OPENAI_COMPATIBLE_MODEL is not set: name the model your server serves"
                " (its /v1/models lists them), or pass --model"
            )
        return settings.openai_compatible_model
    if provider == "local":
        return local_model(settings, catalog, None)
    if provider in LOCAL_MODELS:
        return LOCAL_MODELS[provider]
    for slot in dict.fromkeys((role, INHERITS.get(role, role), "debaters")):
        entry = catalog.default_for(provider, slot)
        if entry is not None:
            return entry.id
    raise SettingsError(
        f"the model catalogue names no default {provider} model: set DEBATEBOT_MODEL, or give a"
        ' catalogue entry "default_roles": ["debaters"] in DEBATEBOT_MODELS_FILE'
    )


def local_model(settings: Settings, catalog: Catalog, name: str | None) -> str:
    """The identity of the local model's file (`FILE.gguf@sha256:…`) when `name` names it or
    is None, so the spec, the turns and every report name the file that answers; another name
    (a hosted model asked of the local provider) is refused before anything is stored."""
    try:
        return served_model(name, settings.local_model_path)
    except ProviderUnavailableError as error:
        vendor = catalog.provider_of(name) if name is not None else None
        hint = (
            f". {name} is an {vendor} model: choose it with `--provider {vendor}`, or"
            f" DEBATEBOT_PROVIDER={vendor} (DEBATEBOT_ROLES__<ROLE>__PROVIDER for one role)"
            if vendor is not None
            else ""
        )
        raise SettingsError(f"{error}{hint}") from error


def role_models(
    settings: Settings,
    catalog: Catalog,
    *,
    provider: str | None = None,
    model: str | None = None,
    overrides: Mapping[str, RoleModel] | None = None,
) -> dict[str, ModelSettings]:
    """The model of every role slot; raises SettingsError naming what to fix."""
    overrides = overrides or {}
    for source, slots in (("DEBATEBOT_ROLES", settings.roles), ("override", overrides)):
        unknown = set(slots) - set(ROLE_SLOTS)
        if unknown:
            raise SettingsError(
                f"{source}: unknown role(s) {', '.join(sorted(unknown))}; roles are"
                f" {', '.join(ROLE_SLOTS)}"
            )
    base = provider or settings.provider
    _check_provider(base, "provider")
    # DEBATEBOT_MODEL names every role's model of the base provider, as --model does.
    model = model or settings.model
    resolved: dict[str, ModelSettings] = {}
    for role in ROLE_SLOTS:
        parent = INHERITS.get(role)
        chosen = _merge(
            settings.roles.get(parent) if parent else None,
            overrides.get(parent) if parent else None,
            settings.roles.get(role),
            overrides.get(role),
        )
        role_provider = chosen.provider
        if role_provider is None and chosen.model is not None:
            # A model the catalogue knows under one vendor needs no `provider:` prefix.
            role_provider = catalog.provider_of(chosen.model)
        if role_provider is None and chosen.model is None:
            other = OTHER_FAMILY.get(base)
            cross = settings.cross_family_moderator and role in JUDGING and other is not None
            role_provider = other if cross and other and _has_key(settings, other) else base
        role_provider = role_provider or base
        _check_provider(role_provider, f"role {role}")
        if chosen.model:
            name = chosen.model
        elif model and role_provider == base:
            name = model
        else:
            name = default_model(settings, catalog, role_provider, role)
        if role_provider == "local":
            name = local_model(settings, catalog, name)
        entry = catalog.find(role_provider, name)
        max_tokens = (
            chosen.max_tokens
            or settings.max_tokens
            or (entry.default_max_tokens if entry is not None else None)
            or FALLBACK_MAX_TOKENS
        )
        resolved[role] = ModelSettings(
            provider=role_provider,
            model=name,
            temperature=(
                chosen.temperature if chosen.temperature is not None else settings.temperature
            ),
            max_tokens=max_tokens,
            effort=chosen.effort,
        )
    return resolved


def judge_model(
    settings: Settings, catalog: Catalog, decider: ModelSettings, debaters: ModelSettings
) -> ModelSettings:
    """The model of a debate's independent judges. Another family's judge shares fewer of the
    debate's blind spots: when the model that decided (`decider`) runs on OpenAI or Anthropic
    and the other family's key is set, the other family's default debaters' model. Otherwise
    the debaters' own model. Either way the debaters' tier, not the moderator's: every debate
    pays for its judging, and a judge reads the whole record anew, past the prompt cache, which
    on the moderator's model would cost a large share of the debate (`benchmarks/cost.py`
    reports it)."""
    other = OTHER_FAMILY.get(decider.provider)
    if other is None or not _has_key(settings, other):
        return debaters
    name = default_model(settings, catalog, other, "debaters")
    entry = catalog.find(other, name)
    return ModelSettings(
        provider=other,
        model=name,
        temperature=debaters.temperature,
        max_tokens=(
            settings.max_tokens
            or (entry.default_max_tokens if entry is not None else None)
            or FALLBACK_MAX_TOKENS
        ),
    )


@dataclass
class ProviderRegistry:
    """Builds each provider once, on first use, from settings. A hosted or OpenAI-compatible
    provider bounds its calls in flight per model by a limit it learns from the vendor's answers,
    under the ceiling `DEBATEBOT_PROVIDER_CONCURRENCY__<provider>`; the local model runs one call
    at a time, the fake any number."""

    settings: Settings
    today: Callable[[], date] = field(default=lambda: datetime.now(UTC).date())
    _instances: dict[str, LLM] = field(default_factory=dict)
    _catalog: Catalog | None = None
    _warned: set[str] = field(default_factory=set)

    @property
    def catalog(self) -> Catalog:
        """The model catalogue, with the deployment's catalogue file and prices over it."""
        if self._catalog is None:
            s = self.settings
            prices = read_prices(s.prices_file) if s.prices_file is not None else {}
            self._catalog = Catalog.load(s.models_file, prices={**prices, **s.prices})
        return self._catalog

    def retry_policy(self) -> RetryPolicy:
        s = self.settings
        return RetryPolicy(
            max_attempts=s.llm_max_attempts,
            base_delay_s=s.llm_backoff_base_s,
            max_delay_s=s.llm_backoff_max_s,
            total_budget_s=s.llm_retry_budget_s,
        )

    def pricing(self, provider: str, model: str) -> Pricing:
        """Hosted providers must have a price; self-hosted ones are free unless one is listed."""
        if provider in ("openai", "anthropic"):
            return self.catalog.require_price(provider, model)
        return self.catalog.price(provider, model) or FREE

    def limits(self, provider: str) -> ModelLimits:
        """The limiters of `provider`'s models: from its start, under its ceiling."""
        ceiling = self.settings.provider_concurrency[provider]
        start = min(START_PROVIDER_CONCURRENCY[provider], ceiling)
        return ModelLimits(provider=provider, start=start, ceiling=ceiling)

    def _modes(self, names: list[str], variable: str) -> list[StructuredMode]:
        try:
            return [StructuredMode(name) for name in names]
        except ValueError:
            raise SettingsError(
                f"{variable}: unknown mode in {names}; modes are"
                f" {', '.join(m.value for m in StructuredMode)}"
            ) from None

    def _build(self, name: str) -> LLM:
        """The provider `name`. Its SDK is imported here, on first use, not when the CLI starts:
        the Anthropic and OpenAI SDKs alone took 1.6–2 s to import."""
        s = self.settings
        if name == "local":
            from engine.providers.local import LocalLlamaLLM

            return LocalLlamaLLM(
                model_path=s.local_model_path,
                n_ctx=s.local_n_ctx,
                n_threads=s.local_threads,
                seed=s.local_seed,
                timeout_s=s.local_timeout_s,
            )
        if name == "fake":
            from engine.providers.fake import CANNED_DEBATE_REPLIES, SchemaFillingLLM

            return SchemaFillingLLM(
                seed=s.fake_seed,
                script=CANNED_DEBATE_REPLIES,
                pricing=lambda model: self.pricing("fake", model),
                delay_s=s.fake_delay_s,
                stream_rate=s.fake_pace,
                record=False,
            )
        if name == "anthropic":
            from engine.providers.anthropic_messages import AnthropicLLM

            return AnthropicLLM(
                api_key=s.provider_key("anthropic") or "",
                base_url=s.anthropic_base_url,
                price_of=lambda model: self.pricing("anthropic", model),
                facts_of=lambda model: self.catalog.find("anthropic", model),
                timeout_s=s.llm_timeout_s,
                retry=self.retry_policy(),
                prompt_caching=s.anthropic_prompt_caching,
                limits=self.limits("anthropic"),
            )
        if name == "openai":
            from engine.providers.openai_chat import OpenAIChatLLM

            return OpenAIChatLLM(
                provider="openai",
                api_key=s.provider_key("openai") or "",
                base_url=s.openai_base_url,
                modes=self._modes(s.openai_structured_modes, "DEBATEBOT_OPENAI_STRUCTURED_MODES"),
                price_of=lambda model: self.pricing("openai", model),
                facts_of=lambda model: self.catalog.find("openai", model),
                timeout_s=s.llm_timeout_s,
                retry=self.retry_policy(),
                key_variable=KEY_VARIABLES["openai"],
                max_tokens_param="max_completion_tokens",
                prompt_cache=True,
                limits=self.limits("openai"),
            )
        if name == "openai-compatible":
            if not s.openai_compatible_base_url:
                raise SettingsError(
                    "DEBATEBOT_OPENAI_COMPATIBLE_BASE_URL is not set: give your server's"
                    " OpenAI-style base URL, e.g. http://127.0.0.1:8080/v1"
                )
            from engine.providers.openai_chat import OpenAIChatLLM

            return OpenAIChatLLM(
                provider="openai-compatible",
                # The SDK insists on a key; servers without authentication ignore it.
                api_key=s.provider_key("openai-compatible") or "no-key-configured",
                base_url=s.openai_compatible_base_url,
                modes=self._modes(
                    s.openai_compatible_structured_modes,
                    "DEBATEBOT_OPENAI_COMPATIBLE_STRUCTURED_MODES",
                ),
                price_of=lambda model: self.pricing("openai-compatible", model),
                # A self-hosted server's models are not in the catalogue: each takes what the
                # role sets until the server refuses something.
                facts_of=lambda _model: None,
                timeout_s=s.llm_timeout_s,
                retry=self.retry_policy(),
                key_variable=KEY_VARIABLES["openai-compatible"],
                limits=self.limits("openai-compatible"),
            )
        raise SettingsError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")

    def lifecycle(self, models: Mapping[str, ModelSettings]) -> list[str]:
        """The deprecation warnings of `models` not given yet by this process, for the caller
        to show (once per model); raises ModelRetiredError when one of them is retired."""
        notes = lifecycle_notes(self.catalog, models, today=self.today())
        fresh = [note for key, note in notes.items() if key not in self._warned]
        self._warned.update(notes)
        return fresh

    def refuse_retired(self, models: Mapping[str, ModelSettings]) -> None:
        """Raise ModelRetiredError when one of `models` is retired (no warnings)."""
        lifecycle_notes(self.catalog, models, today=self.today())

    def resolve(self, model: ModelSettings) -> LLM:
        """The provider object for `model`; a configuration problem fails the debate, named.
        A retired model is refused here, before its provider is asked anything (a debate
        queued before its model's retirement date and run after it)."""
        try:
            self.refuse_retired({"this role": model})
        except ModelRetiredError as error:
            raise ProviderUnavailableError(str(error)) from error
        if model.provider not in self._instances:
            try:
                self._instances[model.provider] = self._build(model.provider)
            except SettingsError as error:
                raise ProviderUnavailableError(str(error)) from error
        return self._instances[model.provider]

    async def aclose(self) -> None:
        """Close the providers that hold connections (the SDK clients), in their event loop."""
        for llm in self._instances.values():
            close = getattr(llm, "aclose", None)
            if close is not None:
                await close()
        self._instances.clear()

    def check(self, models: Mapping[str, ModelSettings]) -> list[str]:
        """Refuse a retired model, build every provider `models` (by role) needs, price every
        model, and refuse an effort a model does not take, before a debate starts; returns the
        deprecation warnings not given yet."""
        notes = self.lifecycle(models)
        for role, chosen in models.items():
            self.resolve(chosen)
            self.pricing(chosen.provider, chosen.model)
            entry = self.catalog.find(chosen.provider, chosen.model)
            if chosen.provider == "anthropic":
                # Imported here: resolve() above has loaded the SDK for it already.
                from engine.providers.anthropic_messages import check_effort as anthropic_effort

                anthropic_effort(entry, chosen.model, chosen.effort, setting=effort_setting(role))
            elif chosen.provider == "openai":
                check_effort(entry, chosen.effort, setting=effort_setting(role))
        return notes
