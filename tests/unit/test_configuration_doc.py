"""docs/configuration.md is generated from the settings class and must not go stale."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from bot.cli import settings_doc
from bot.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_says_what_it_does():
    assert settings_doc.undocumented() == []


def test_the_file_matches_the_settings_class():
    written = DOC.read_text(encoding="utf-8")
    assert written == settings_doc.markdown(), (
        "docs/configuration.md is stale: run `debatebot settings --markdown >"
        " docs/configuration.md` and commit it"
    )


def test_every_variable_appears_once_with_its_prefix():
    text = settings_doc.markdown()
    for name in Settings.model_fields:
        assert text.count(f"`DEBATEBOT_{name.upper()}`") == 1, name


def test_aliases_and_nested_settings_are_named():
    text = settings_doc.markdown()
    assert "`DEBATEBOT_OPENAI_API_KEY` / `OPENAI_API_KEY`" in text
    assert "`DEBATEBOT_ROLES__<KEY>`" in text


def test_no_secret_default_is_shown():
    for name, info in Settings.model_fields.items():
        if "secret" in str(info.annotation).lower():
            assert settings_doc.default_text(info) in {"none", "(secret)"}, name


def test_the_command_prints_the_same_markdown():
    out = io.StringIO()
    assert settings_doc.settings(argparse.Namespace(markdown=True), out) == 0
    assert out.getvalue() == settings_doc.markdown()
