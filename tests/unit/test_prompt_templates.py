"""Prompt templates render as `string.Template` would, from a form parsed once at load."""

from __future__ import annotations

from string import Template

import pytest

from engine.errors import PromptIntegrityError
from engine.prompts import PromptTemplate, compute_lock, default_prompt_dir
from tests.helpers import shipped_prompts


def placeholders(text: str) -> set[str]:
    found = (m.group("named") or m.group("braced") for m in Template.pattern.finditer(text))
    return {name for name in found if name}


def test_every_shipped_template_renders_exactly_as_string_template_does() -> None:
    library = shipped_prompts()
    for name in compute_lock(default_prompt_dir()):
        text = library.get(name).text
        # Values that look like placeholders themselves must come out untouched.
        values = {key: f"<{key}: $other ${{x}} $$>" for key in placeholders(text)}
        assert library.get(name).render(**values) == Template(text).substitute(values)


def test_dollar_escapes_braces_and_adjacent_text() -> None:
    template = PromptTemplate(name="t", text="$$5, ${a}b, $c.", sha256="")
    assert template.render(a="A", c="C") == "$5, Ab, C."


def test_a_missing_value_names_the_template_and_the_placeholder() -> None:
    template = PromptTemplate(name="roles/x.md", text="Hello $who", sha256="")
    with pytest.raises(PromptIntegrityError, match=r"roles/x.md needs a value for \$who"):
        template.render()


def test_a_stray_dollar_is_refused_when_the_template_is_loaded() -> None:
    with pytest.raises(PromptIntegrityError, match=r"roles/y.md has a stray \$ .* write \$\$"):
        PromptTemplate(name="roles/y.md", text="costs $ 5", sha256="")
