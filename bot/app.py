"""The composition root: the one place that turns settings into working objects.

Nothing here runs at import time; `build_services(settings)` is called by the CLI (and later by
the Slack app and the workers), and tests pass their own fakes instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Engine

from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.settings import Settings
from bot.store.db import check_schema, make_engine
from engine.errors import ProviderUnavailableError
from engine.ledger import LLMResolver
from engine.llm import LLM
from engine.models import ContextDocument, DebateSpec, ModelSettings
from engine.prompts import PromptLibrary
from engine.providers.fake import FunctionLLM, canned_debate_reply
from engine.providers.local import SMOLLM2_MODEL_NAME, LocalLlamaLLM

DEFAULT_MODELS = {"local": SMOLLM2_MODEL_NAME, "fake": "fake-model"}
PROVIDERS = tuple(DEFAULT_MODELS)


@dataclass
class ProviderRegistry:
    """Builds each provider once, on first use, from settings."""

    settings: Settings
    _instances: dict[str, LLM] = field(default_factory=dict)

    def _build(self, name: str) -> LLM:
        if name == "local":
            return LocalLlamaLLM(
                model_path=self.settings.local_model_path,
                n_ctx=self.settings.local_n_ctx,
                n_threads=self.settings.local_threads,
                seed=self.settings.local_seed,
            )
        if name == "fake":
            return FunctionLLM(canned_debate_reply, delay_s=self.settings.fake_delay_s)
        raise ProviderUnavailableError(
            f"unknown provider {name!r}; configured providers: {', '.join(PROVIDERS)}"
        )

    def resolve(self, model: ModelSettings) -> LLM:
        if model.provider not in self._instances:
            self._instances[model.provider] = self._build(model.provider)
        return self._instances[model.provider]


@dataclass
class DebateServices:
    settings: Settings
    prompts: PromptLibrary
    resolve_llm: LLMResolver

    def default_model(self, provider: str | None = None, model: str | None = None) -> ModelSettings:
        provider = provider or self.settings.provider
        return ModelSettings(
            provider=provider,
            model=model or self.settings.model or DEFAULT_MODELS.get(provider, "default"),
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
        )

    def new_spec(
        self,
        question: str,
        *,
        context: list[ContextDocument] | None = None,
        protocol: str = "adversarial",
        rounds: int | None = None,
        budget_usd: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> DebateSpec:
        """A spec with the configured defaults; raises pydantic's ValidationError on bad input."""
        return DebateSpec(
            question=question,
            protocol=protocol,
            context=context or [],
            max_rounds=rounds or self.settings.rounds,
            budget_usd=budget_usd if budget_usd is not None else self.settings.budget_usd,
            escalation_threshold=self.settings.escalation_threshold,
            default_model=self.default_model(provider, model),
        )


@contextmanager
def open_store(settings: Settings) -> Iterator[Engine]:
    """The database engine, checked to be at the current schema (else: `debatebot db upgrade`),
    disposed of when the block ends."""
    engine = make_engine(settings.database_url)
    try:
        check_schema(engine)
        yield engine
    finally:
        engine.dispose()


def build_worker(
    services: DebateServices, engine: Engine, *, worker_id: str | None = None
) -> DebateWorker:
    settings = services.settings
    return DebateWorker(
        engine=engine,
        resolve_llm=services.resolve_llm,
        prompts=services.prompts,
        worker_id=worker_id,
        config=WorkerConfig(
            lease_s=settings.worker_lease_s,
            heartbeat_s=settings.worker_heartbeat_s,
            poll_s=settings.worker_poll_s,
        ),
    )


def build_services(settings: Settings) -> DebateServices:
    """Load and verify the prompts and set up the providers; fails fast on tampered prompts."""
    registry = ProviderRegistry(settings)
    return DebateServices(
        settings=settings,
        prompts=PromptLibrary.load(settings.prompts_dir),
        resolve_llm=registry.resolve,
    )
