"""The deployment files say what the code does: `.env.example` lists every setting with no
secret in it, compose runs migrate before serve and the workers, and the Dockerfile builds a
non-root image whose health check is /healthz. (CI has no Docker engine: the image itself is built
and run by scripts/docker-smoke; see the README.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from bot.settings import Settings
from tests.helpers import REPO_ROOT

ENV_EXAMPLE = REPO_ROOT / ".env.example"
NESTED = {"roles", "provider_concurrency", "fake_pace"}


def assignments(path: Path) -> dict[str, tuple[str, bool]]:
    """Every `NAME=value` line, commented out or not: name -> (value, active)."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"(#\s*)?([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if match:
            found[match.group(2)] = (match.group(3), match.group(1) is None)
    return found


def test_env_example_names_every_setting_and_holds_no_secret() -> None:
    names = assignments(ENV_EXAMPLE)
    for field, info in Settings.model_fields.items():
        variable = f"DEBATEBOT_{field.upper()}"
        if field in NESTED:
            assert any(n.startswith(f"{variable}__") for n in names), variable
        else:
            assert variable in names, f"{variable} is missing from .env.example"
        if info.annotation is not None and SecretStr in getattr(info.annotation, "__args__", ()):
            value, active = names[variable]
            assert value == "", f"{variable} must be empty in .env.example"
            assert active, f"{variable} is a secret to fill in, so it is not commented out"
    active_values = {name: value for name, (value, on) in names.items() if on}
    assert all(value == "" for value in active_values.values()), "only empty blanks are active"


def test_env_example_as_is_starts_the_bot_on_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, (value, active) in assignments(ENV_EXAMPLE).items():
        if active:
            monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.slack_app_token is None, "an empty variable counts as unset"
    assert settings.provider == "local"


def test_compose_migrates_before_serve_and_the_scalable_workers() -> None:
    compose = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "serve", "worker"}
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("serve", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
        assert services[name]["environment"]["DEBATEBOT_DATABASE_URL"].startswith(
            "postgresql+psycopg://debatebot:"
        )
    assert services["worker"]["command"][:1] == ["worker"]
    assert "9100/metrics" in " ".join(services["worker"]["healthcheck"]["test"])
    referenced = set(re.findall(r"\$\{([A-Z_]+)", (REPO_ROOT / "compose.yaml").read_text()))
    assert referenced <= set(assignments(ENV_EXAMPLE)), "compose's variables are documented"


def test_the_workspaces_compose_runs_two_serve_replicas_behind_the_proxy() -> None:
    """Many workspaces: two `serve` replicas, no bot token of their own, reached only through
    the proxy, which resolves the replicas per request; migrate first, as in compose.yaml."""
    text = (REPO_ROOT / "compose.workspaces.yaml").read_text()
    services = yaml.safe_load(text)["services"]
    assert set(services) == {"postgres", "migrate", "serve", "proxy", "worker"}
    assert services["serve"]["command"] == ["serve"]
    assert services["serve"]["deploy"]["replicas"] == 2
    assert "ports" not in services["serve"], "Slack reaches serve through the proxy only"
    for name in ("serve", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert "DEBATEBOT_SLACK_BOT_TOKEN" not in services["serve"]["environment"]
    [mount] = services["proxy"]["volumes"]
    assert mount.startswith("./deploy/proxy.conf:")
    proxy = (REPO_ROOT / "deploy" / "proxy.conf").read_text()
    assert "set $serve serve:3000;" in proxy
    assert "proxy_pass http://$serve;" in proxy
    assert "resolver 127.0.0.11" in proxy
    referenced = set(re.findall(r"\$\{([A-Z_]+)", text))
    assert referenced <= set(assignments(ENV_EXAMPLE)), "compose's variables are documented"


def test_dockerfile_builds_llama_once_and_runs_as_a_non_root_user() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", text, flags=re.MULTILINE)
    assert [alias for _, alias in stages] == ["builder", ""]
    builder, runtime = text.split("\nFROM ${PYTHON_IMAGE}\n")
    assert 'pip wheel --wheel-dir /wheels "llama-cpp-python' in builder
    assert "--find-links /wheels" in builder
    assert "build-essential" not in runtime, "no compiler in the runtime image"
    assert "pip uninstall --yes --quiet pip setuptools" in builder, "no pip in the runtime venv"
    assert not text.startswith("# syntax="), "the built-in frontend: nothing to pull"
    assert text.count("--mount=type=secret,id=ca,required=false") == 2, "pip's CA, never a layer"
    assert re.search(r"^USER debatebot$", runtime, flags=re.MULTILINE)
    assert "/healthz" in runtime.split("HEALTHCHECK", 1)[1].split("\n\n")[0]
    assert 'ENTRYPOINT ["debatebot"]' in runtime
    folders = {"bot", "engine", "prompts", "migrations"}
    for folder in folders:
        assert f"COPY {folder} {folder}" in builder
        assert f"!{folder}/" in (REPO_ROOT / ".dockerignore").read_text()
