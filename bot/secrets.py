"""Checks of secret settings: a missing or placeholder value stops start-up with a message that
names the variable and where its real value comes from."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import SecretStr


@dataclass(frozen=True)
class SlackOAuth:
    """What installing the app over OAuth needs, checked (see `Settings.slack_oauth`)."""

    client_id: str
    client_secret: str = field(repr=False)
    signing_secret: str = field(repr=False)
    encryption_keys: tuple[bytes, ...] = field(repr=False)
    """The token keys: the first encrypts, every one decrypts (a rotation in progress)."""
    redirect_uri: str | None = None


CLIENT_ID = re.compile(r"[0-9]+\.[0-9]+")
"""Slack's client ids: two numbers joined by a dot."""
REDIRECT_PATH = "/slack/oauth_redirect"
"""Where Slack sends the installer back with the code (Bolt's default path)."""
PLACEHOLDERS = re.compile(r"change-?me|changethis|your[-_]|x{6,}|\.\.\.|[<>]|todo|placeholder")


class SettingsError(ValueError):
    """A setting that stops start-up; the message names the variable and how to fix it."""


MAKE_KEY = "`python -c 'import secrets; print(secrets.token_hex(32))'`"


def secret_value(
    value: SecretStr | None,
    variable: str,
    *,
    prefix: str,
    where: str = "your Slack app's settings page (see docs/slack.md, 'Install the Slack app')",
) -> str:
    """The stripped value of `variable`, refusing a missing, placeholder or misprefixed one."""
    raw = value.get_secret_value().strip() if value is not None else ""
    if not raw:
        raise SettingsError(f"{variable} is not set. Copy it from {where}")
    lowered = raw.lower()
    if PLACEHOLDERS.search(lowered) or len(lowered.removeprefix(prefix)) < 8:
        raise SettingsError(f"{variable} holds a placeholder, not a real value; set the real one")
    if prefix and not raw.startswith(prefix):
        raise SettingsError(
            f"{variable} should start with {prefix!r}; check which token you copied"
        )
    return raw


def encryption_keys(value: SecretStr | None, audit_key: SecretStr | None) -> tuple[bytes, ...]:
    """DEBATEBOT_TOKEN_ENCRYPTION_KEY's keys, first the one that encrypts: one secret, several
    separated by commas, or a JSON list of them. Each must be long, no placeholder, and not the
    audit key."""
    variable = "DEBATEBOT_TOKEN_ENCRYPTION_KEY"
    where = f"a secret of your own, e.g. {MAKE_KEY}"
    raw = secret_value(value, variable, prefix="", where=where)
    if raw.startswith("["):
        try:
            listed = json.loads(raw)
        except json.JSONDecodeError:
            listed = None
        if not isinstance(listed, list) or not all(isinstance(key, str) for key in listed):
            raise SettingsError(f"{variable} starts with '[' but is not a JSON list of strings")
        keys = [key.strip() for key in listed]
    else:
        keys = [key.strip() for key in raw.split(",")]
    audit = audit_key.get_secret_value().strip() if audit_key is not None else None
    for index, key in enumerate(keys):
        which = f"{variable} (key {index + 1} of {len(keys)})" if len(keys) > 1 else variable
        secret_value(SecretStr(key), which, prefix="", where=where)
        if len(key) < 32:
            raise SettingsError(
                f"{which} is shorter than 32 characters; use a long random secret, e.g. {MAKE_KEY}"
            )
        if key == audit:
            raise SettingsError(
                f"{which} is the same as DEBATEBOT_AUDIT_KEY; give each its own secret (one"
                f" leaked must not open the other), e.g. {MAKE_KEY}"
            )
    if len(set(keys)) != len(keys):
        raise SettingsError(f"{variable} lists one key twice; list each key once, the new first")
    return tuple(key.encode() for key in keys)


def client_id_value(value: str | None, *, where: str) -> str:
    """DEBATEBOT_SLACK_CLIENT_ID, refusing a missing or placeholder value and anything that is
    not a Slack client id."""
    client_id = secret_value(
        SecretStr(value) if value is not None else None,
        "DEBATEBOT_SLACK_CLIENT_ID",
        prefix="",
        where=where,
    )
    if not CLIENT_ID.fullmatch(client_id):
        raise SettingsError(
            "DEBATEBOT_SLACK_CLIENT_ID is not a Slack client id (digits, a dot, digits);"
            f" copy it from {where}"
        )
    return client_id


def redirect_uri_value(redirect: str | None) -> str | None:
    """DEBATEBOT_SLACK_REDIRECT_URI, which must be the public address of the OAuth redirect."""
    if redirect is not None and not (
        redirect.startswith(("https://", "http://")) and redirect.endswith(REDIRECT_PATH)
    ):
        raise SettingsError(
            f"DEBATEBOT_SLACK_REDIRECT_URI must be the bot's public address of {REDIRECT_PATH}"
            f" (https://…{REDIRECT_PATH}), as listed under OAuth & Permissions -> Redirect"
            f" URLs; got {redirect!r}"
        )
    return redirect


def audit_key_bytes(value: SecretStr | None) -> bytes | None:
    """DEBATEBOT_AUDIT_KEY, refusing a placeholder or one too short to be secret; None when
    unset (seals are then unsigned, and `serve` and `worker` warn)."""
    if value is None:
        return None
    raw = secret_value(
        value, "DEBATEBOT_AUDIT_KEY", prefix="", where=f"a secret of your own, e.g. {MAKE_KEY}"
    )
    if len(raw) < 32:
        raise SettingsError(
            "DEBATEBOT_AUDIT_KEY is shorter than 32 characters; use a long random secret,"
            f" e.g. {MAKE_KEY}"
        )
    return raw.encode()


def host_token(value: SecretStr | None, host: str) -> str | None:
    """The GitHub or GitLab token (`host`: github or gitlab), refusing a placeholder; None when
    unset (public repositories only)."""
    if value is None:
        return None
    variable = "DEBATEBOT_GITHUB_TOKEN" if host == "github" else "DEBATEBOT_GITLAB_TOKEN"
    return secret_value(value, variable, prefix="", where=f"your {host} account's token settings")


def provider_api_key(
    provider: str,
    *,
    openai: SecretStr | None,
    anthropic: SecretStr | None,
    openai_compatible: SecretStr | None,
) -> str | None:
    """The API key of a hosted provider from its setting, refusing a missing or placeholder one
    by name; None for providers that need none (local, fake, a keyless OpenAI-compatible
    server)."""
    if provider == "openai":
        return secret_value(
            openai,
            "DEBATEBOT_OPENAI_API_KEY (or OPENAI_API_KEY)",
            prefix="",
            where="the API keys page of your OpenAI organization",
        )
    if provider == "anthropic":
        return secret_value(
            anthropic,
            "DEBATEBOT_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)",
            prefix="",
            where="the API keys page of the Anthropic console",
        )
    if provider == "openai-compatible" and openai_compatible is not None:
        return secret_value(
            openai_compatible,
            "DEBATEBOT_OPENAI_COMPATIBLE_API_KEY",
            prefix="",
            where="your server's configuration",
        )
    return None
