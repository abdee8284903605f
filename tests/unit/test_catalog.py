"""The model catalogue holds together: every entry sourced, dated and priced, every default
current today, every replacement a current model, and the lifecycle rules say what they should."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from engine.catalog import (
    Catalog,
    CatalogError,
    Lifecycle,
    ModelEntry,
    ModelRetiredError,
    Thinking,
    lifecycle_notes,
)
from engine.models import ModelSettings
from engine.providers.schemas import StructuredMode

CATALOG = Catalog.load()
TODAY = datetime.now(UTC).date()
MODES = {
    "anthropic": {StructuredMode.OUTPUT_FORMAT, StructuredMode.TOOL, StructuredMode.PROMPT},
    "openai": {
        StructuredMode.JSON_SCHEMA,
        StructuredMode.JSON_OBJECT_SCHEMA,
        StructuredMode.JSON_OBJECT,
        StructuredMode.PROMPT,
    },
}


@pytest.mark.parametrize("entry", CATALOG.entries, ids=lambda e: e.key)
def test_every_entry_has_a_source_a_checked_date_and_positive_prices(entry: ModelEntry) -> None:
    assert entry.source.strip()
    assert entry.checked <= TODAY
    assert entry.prices.input_per_mtok > 0
    assert entry.prices.output_per_mtok > 0
    for rate in (entry.prices.cached_input_per_mtok, entry.prices.cache_write_per_mtok):
        assert rate is None or rate > 0
    assert set(entry.structured) <= MODES[entry.provider]
    assert entry.structured[-1] is StructuredMode.PROMPT, "the last resort is always possible"


def test_every_default_is_current_today_and_each_provider_has_one_per_slot() -> None:
    for provider in ("anthropic", "openai"):
        for slot in ("debaters", "moderator"):
            defaults = [e for e in CATALOG.of(provider) if slot in e.default_roles]
            assert len(defaults) == 1, (provider, slot)
            assert defaults[0].lifecycle(TODAY) is Lifecycle.CURRENT, defaults[0].key


def test_every_replacement_is_a_current_model_of_the_same_provider() -> None:
    for entry in CATALOG.entries:
        if entry.replacement is None:
            continue
        replacement = CATALOG.find(entry.provider, entry.replacement)
        assert replacement is not None, entry.key
        assert replacement.lifecycle(TODAY) is Lifecycle.CURRENT, entry.key


def test_names_are_unique_within_a_provider() -> None:
    for provider in ("anthropic", "openai"):
        names = [name for e in CATALOG.of(provider) for name in e.names()]
        assert len(names) == len(set(names))


def test_the_documented_late_2026_rules_are_in_the_catalogue() -> None:
    """What the issue names: Claude 5.5 models refuse forced tool use and always think; the
    retiring defaults are marked with their dates and replacements."""
    for model in ("claude-opus-5-5", "claude-sonnet-5-5"):
        entry = CATALOG.find("anthropic", model)
        assert entry is not None
        assert entry.structured[0] is StructuredMode.OUTPUT_FORMAT
        assert StructuredMode.TOOL not in entry.structured
        assert entry.thinking is Thinking.ALWAYS
        assert not entry.temperature
    sonnet = CATALOG.find("anthropic", "claude-sonnet-4-5-20250929")
    assert sonnet is not None
    assert (sonnet.retires_on, sonnet.replacement) == (date(2026, 11, 30), "claude-sonnet-5-5")
    gpt41 = CATALOG.find("openai", "gpt-4.1-2025-04-14")
    assert gpt41 is not None
    assert gpt41.retires_on == date(2027, 1, 14)


def test_lifecycle_runs_from_current_to_deprecated_to_retired() -> None:
    entry = CATALOG.find("anthropic", "claude-sonnet-4-5")
    assert entry is not None
    assert entry.lifecycle(date(2026, 11, 29)) is Lifecycle.DEPRECATED
    assert entry.status(date(2026, 11, 29)) == "deprecated until 2026-11-30"
    assert entry.lifecycle(date(2026, 11, 30)) is Lifecycle.RETIRED
    assert entry.status(date(2026, 12, 1)) == "retired on 2026-11-30"
    current = CATALOG.find("anthropic", "claude-opus-5-5")
    assert current is not None
    assert current.lifecycle(date(2026, 11, 29)) is Lifecycle.CURRENT


def test_a_deprecated_model_warns_once_per_model_and_a_retired_one_is_refused() -> None:
    sonnet = ModelSettings(provider="anthropic", model="claude-sonnet-4-5")
    notes = lifecycle_notes(
        CATALOG, {"critic": sonnet, "moderator": sonnet}, today=date(2026, 11, 25)
    )
    assert list(notes) == ["anthropic:claude-sonnet-4-5"]
    note = notes["anthropic:claude-sonnet-4-5"]
    assert "retires on 2026-11-30" in note
    assert "claude-sonnet-5-5" in note
    assert "critic, moderator" in note

    with pytest.raises(ModelRetiredError) as refused:
        lifecycle_notes(CATALOG, {"moderator": sonnet}, today=date(2026, 12, 1))
    said = str(refused.value)
    assert "retired on 2026-11-30" in said
    assert "claude-sonnet-5-5" in said
    assert "DEBATEBOT_MODEL=claude-sonnet-5-5" in said
    assert "Nothing was sent to the model" in said

    unknown = ModelSettings(provider="anthropic", model="claude-next-preview")
    assert lifecycle_notes(CATALOG, {"critic": unknown}, today=TODAY) == {}


def test_a_catalogue_file_adds_and_replaces_entries(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(
        '{"models": [{"provider": "anthropic", "id": "claude-opus-5-5", "prices": {'
        '"input_per_mtok": 3, "output_per_mtok": 15}, "structured": ["tool", "prompt"],'
        ' "temperature": false, "thinking": "always", "source": "our contract",'
        ' "checked": "2026-11-25"}, {"provider": "openai", "id": "house-model", "prices": {'
        '"input_per_mtok": 1, "output_per_mtok": 2}, "structured": ["json_schema", "prompt"],'
        ' "temperature": true, "thinking": "none", "source": "ours", "checked": "2026-11-25"}]}'
    )
    catalog = Catalog.load(path)
    opus = catalog.find("anthropic", "claude-opus-5-5")
    assert opus is not None
    assert opus.prices.input_per_mtok == 3
    assert opus.structured == [StructuredMode.TOOL, StructuredMode.PROMPT]
    assert catalog.require_price("openai", "house-model").output_per_mtok == 2
    assert catalog.provider_of("house-model") == "openai"
    path.write_text('{"models": [{"provider": "openai"}]}')
    with pytest.raises(CatalogError, match="cannot read the model catalogue"):
        Catalog.load(path)


def test_a_retiring_entry_without_a_replacement_is_refused() -> None:
    with pytest.raises(ValueError, match="must name its replacement"):
        ModelEntry.model_validate(
            {
                "provider": "openai",
                "id": "x",
                "prices": {"input_per_mtok": 1, "output_per_mtok": 1},
                "structured": ["prompt"],
                "temperature": True,
                "thinking": "none",
                "retires_on": str(TODAY + timedelta(days=30)),
                "source": "s",
                "checked": str(TODAY),
            }
        )
