"""`debatebot settings`: every setting with its variable, default and meaning, read from the
settings class itself, so `docs/configuration.md` (written by `--markdown`) cannot drift from
the code; a test fails when the file is stale."""

from __future__ import annotations

import argparse
import json
import sys
from enum import Enum
from pathlib import Path
from typing import TextIO

from pydantic import AliasChoices, BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bot.settings import Settings

PREFIX = str(Settings.model_config.get("env_prefix", ""))
NESTED = str(Settings.model_config.get("env_nested_delimiter", "__"))

HEADER = """# Configuration

Written by `debatebot settings --markdown > docs/configuration.md` from the settings class
(`bot/settings.py`); a test fails when this file and the class disagree, so edit the class and
run the command again.

Every setting is an environment variable (or a line of a `.env` file in the current folder);
an empty variable counts as unset. Nested settings take `__` between the parts, e.g.
`DEBATEBOT_ROLES__MODERATOR__MODEL=claude-opus-5-5`. A secret's value is never shown by any
command, log or page.

| variable | default | meaning |
| --- | --- | --- |
"""


def variables(name: str, info: FieldInfo) -> list[str]:
    """The environment variables that set field `name`, the prefixed one first."""
    names = [f"{PREFIX}{name}".upper()]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        names += [str(choice) for choice in alias.choices if str(choice) not in names]
    if _is_mapping(info):
        names = [f"{names[0]}{NESTED}<KEY>", *names]
    return names


def _is_mapping(info: FieldInfo) -> bool:
    origin = getattr(info.annotation, "__origin__", None)
    return origin is dict


def default_text(info: FieldInfo) -> str:
    """The default as a person would type it; `none` for unset, never a secret's value."""
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "none"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict | list):
        return json.dumps(_plain(value), separators=(",", ":"))
    return str(value)


def _plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def undocumented() -> list[str]:
    """Fields with no description: each must say what it does before the docs are written."""
    return [name for name, info in Settings.model_fields.items() if not info.description]


def markdown() -> str:
    """`docs/configuration.md` as the settings class has it."""
    rows = []
    for name, info in Settings.model_fields.items():
        names = " / ".join(f"`{variable}`" for variable in variables(name, info))
        meaning = (info.description or "").replace("|", "\\|").replace("\n", " ")
        default = default_text(info).replace("|", "\\|")
        rows.append(f"| {names} | `{default}` | {meaning} |")
    return HEADER + "\n".join(rows) + "\n"


def settings(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    missing = undocumented()
    if missing:
        print(f"debatebot: settings without a description: {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.markdown:
        out.write(markdown())
        return 0
    for name, info in Settings.model_fields.items():
        out.write(f"{variables(name, info)[0]} = {default_text(info)}\n    {info.description}\n")
    return 0
