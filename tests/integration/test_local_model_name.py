"""The record names the local model that answers: its file and the start of the file's SHA-256,
in the spec, the turns and the CLI's output. A model name the local provider cannot serve (a
hosted model's, or any other) is refused before anything is stored, naming the setting that
chooses the local model's file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlmodel import Session, select

from bot.cli import main
from bot.settings import Settings, SettingsError
from bot.store.db import make_engine
from bot.store.debate_tables import Debate
from bot.wiring import build_services
from engine.providers.local import model_identity, smollm2_path


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    for name in [n for n in os.environ if n.startswith("DEBATEBOT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    return url


@pytest.mark.parametrize(
    ("asked", "refused", "hint"),
    [
        (["--model", "claude-sonnet-4-5"], "'claude-sonnet-4-5'", "`--provider anthropic`"),
        (["--model", "foo"], "'foo'", "choose the provider that serves it"),
        (["--moderator", "local:gpt-4.1"], "'gpt-4.1'", "`--provider openai`"),
    ],
)
def test_a_model_the_local_provider_cannot_serve_is_refused_before_anything_is_stored(
    database: str,
    capsys: pytest.CaptureFixture[str],
    asked: list[str],
    refused: str,
    hint: str,
) -> None:
    code = main(["run", "Should we store passwords with MD5?", *asked])

    err = capsys.readouterr().err
    assert code == 1
    assert f"the local provider cannot serve the model {refused}" in err
    assert model_identity(smollm2_path()) in err
    assert "DEBATEBOT_LOCAL_MODEL_PATH" in err
    assert hint in err
    assert "generating on" not in err
    engine = make_engine(database)
    with Session(engine) as session:
        assert session.exec(select(Debate)).all() == []
    engine.dispose()


def test_every_role_of_a_local_spec_names_the_file_and_its_hash(tmp_path: Path) -> None:
    weights = tmp_path / "my-model.Q8_0.gguf"
    weights.write_bytes(b"GGUF" + b"\x01" * 4096)
    identity = model_identity(weights)
    assert identity.startswith("my-model.Q8_0.gguf@sha256:")
    assert len(identity.rsplit(":", 1)[1]) == 12

    for asked in (None, "my-model.Q8_0.gguf", identity):
        services = build_services(Settings(provider="local", local_model_path=weights))
        spec = services.policy.spec("Adopt ADR-9?", model=asked, judges=1)
        assert {p.model.model for p in spec.participants} == {identity}
        assert spec.default_model.model == identity
    # The bundled model's old name is only the bundled file's.
    services = build_services(Settings(provider="local", local_model_path=weights))
    with pytest.raises(SettingsError, match="DEBATEBOT_LOCAL_MODEL_PATH"):
        services.policy.spec("Adopt ADR-9?", model="smollm2-135m-instruct")
    bundled = build_services(Settings(provider="local"))
    spec = bundled.policy.spec("Adopt ADR-9?", model="smollm2-135m-instruct")
    assert spec.default_model.model == model_identity(smollm2_path())


def test_a_file_changed_in_place_is_hashed_again(tmp_path: Path) -> None:
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"one")
    first = model_identity(weights)
    weights.write_bytes(b"other")
    assert model_identity(weights) != first
