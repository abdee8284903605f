"""Checks of secret settings: a missing or placeholder value stops start-up with a message that
names the variable and where its real value comes from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import SecretStr


@dataclass(frozen=True)
class SlackOAuth:
    """What installing the app over OAuth needs, checked (see `Settings.slack_oauth`)."""

    client_id: str
    client_secret: str = field(repr=False)
    signing_secret: str = field(repr=False)
    encryption_key: bytes = field(repr=False)
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
