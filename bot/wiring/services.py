"""The services every process runs debates with, built from the settings: the prompts, the model
providers, the code hosts and the spec policy; the store they write to; and the start-up check
of the configured models' lifecycle."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Engine

from bot.hosts.clients import HostClients
from bot.hosts.links import HostConfig
from bot.intake.policy import SpecPolicy
from bot.providers import ProviderRegistry
from bot.secrets import host_token
from bot.settings import Settings, SettingsError
from bot.store.db import ensure_schema, make_engine
from engine.catalog import ModelRetiredError
from engine.ledger import LLMResolver
from engine.prompts import PromptLibrary

log = logging.getLogger(__name__)


@dataclass
class DebateServices:
    settings: Settings
    prompts: PromptLibrary
    resolve_llm: LLMResolver

    registry: ProviderRegistry
    hosts: HostClients
    policy: SpecPolicy

    async def aclose(self) -> None:
        """Close what the services opened: the providers' and the code hosts' HTTP clients."""
        await self.hosts.aclose()
        await self.registry.aclose()


@contextlib.contextmanager
def open_store(settings: Settings, *, serving: bool = False) -> Iterator[Engine]:
    """The database engine at the current schema (SQLite migrates itself in a folder that
    exists; PostgreSQL needs `debatebot db upgrade`), disposed of when the block ends; with
    `serving`, a SQLite file the bot cannot write is served read-only (`ensure_schema`)."""
    engine = make_engine(settings.database_url, busy_timeout_s=settings.database_timeout_s)
    try:
        ensure_schema(engine, serving=serving)
        yield engine
    finally:
        engine.dispose()


def build_services(settings: Settings, *, resolve_llm: LLMResolver | None = None) -> DebateServices:
    """Load and verify the prompts and set up the providers; fails fast on tampered prompts.
    `resolve_llm` replaces the providers (tests and benchmarks pass their fakes here)."""
    registry = ProviderRegistry(settings)
    return DebateServices(
        settings=settings,
        prompts=PromptLibrary.load(settings.prompts_dir),
        resolve_llm=resolve_llm or registry.resolve,
        registry=registry,
        hosts=HostClients(host_config(settings)),
        policy=SpecPolicy(settings, registry),
    )


def host_config(settings: Settings) -> HostConfig:
    """Where linked ADRs are fetched from, with which tokens (placeholders refused)."""
    return HostConfig(
        github_url=settings.github_url,
        github_token=host_token(settings.github_token, "github"),
        gitlab_url=settings.gitlab_url,
        gitlab_token=host_token(settings.gitlab_token, "gitlab"),
        github_api_url=settings.github_api_url,
        gitlab_api_url=settings.gitlab_api_url,
        timeout_s=settings.host_timeout_s,
    )


def check_configured_models(services: DebateServices) -> None:
    """At start-up: the configured models' lifecycle. A retired one stops the process with
    SettingsError naming its replacement (every debate would fail); a deprecated one is logged
    once, with its retirement date and replacement."""
    try:
        notes = services.registry.lifecycle(services.policy.models())
    except ModelRetiredError as error:
        raise SettingsError(str(error)) from error
    for note in notes:
        log.warning("deprecated model: %s", note)
