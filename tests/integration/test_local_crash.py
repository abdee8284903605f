"""A native crash of the local model fails the call it hit, not the process that made it.

The model runs in a child process; here the child is a stand-in whose `Llama` kills its process
with SIGSEGV on a request holding `[segfault]`, as llama.cpp built for another CPU does in ggml's
AMX code (tests/integration/crashing_llama.py). The call fails with the cause and the fix, the
next call starts a new child, repeated crashes are refused without starting one again, a worker
ends the debate that hit the crash FAILED and runs the next, and the child never outlives its
parent. The record names the model file that answered, and its seal verifies.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.cli import main
from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.settings import Settings
from bot.store import queue, turns, verify
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource, DebateState
from bot.store.tenancy import EVERY_WORKSPACE
from bot.wiring import build_services
from engine.errors import LLMError, ModelProcessCrashedError, SchemaTooLargeError
from engine.llm import LLMRequest, Message, complete_structured
from engine.models import CriticTurn, DebateSpec, DebateStatus
from engine.providers.llama_process import LlamaProcess
from engine.providers.local import LocalLlamaLLM, model_identity
from tests.helpers import REPO_ROOT

STAND_IN = "tests.integration.crashing_llama"
KEY = b"k" * 40


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    """A model file for the stand-in (which only checks that it exists)."""
    path = tmp_path / "tiny-model.Q8_0.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


@pytest.fixture
async def llm(weights: Path) -> AsyncIterator[LocalLlamaLLM]:
    local = LocalLlamaLLM(model_path=weights, n_threads=1, child_module=STAND_IN)
    yield local
    await local.aclose()


def ask(text: str, model: str = "tiny-model.Q8_0.gguf", max_tokens: int = 64) -> LLMRequest:
    return LLMRequest(
        messages=[Message(role="user", content=text)], model=model, max_tokens=max_tokens
    )


async def test_a_crash_fails_the_call_with_the_fix_and_the_next_call_runs(
    llm: LocalLlamaLLM, weights: Path
) -> None:
    with pytest.raises(ModelProcessCrashedError) as crashed:
        await llm.complete(ask("[segfault] Is MD5 fine for passwords?"))

    message = str(crashed.value)
    assert "died while generating (killed by SIGSEGV, a segmentation fault)" in message
    assert "scripts/setup" in message
    assert (
        "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --force-reinstall --no-cache-dir"
        " llama-cpp-python" in message
    )
    answer = await llm.complete(ask("Is MD5 fine for passwords?"))
    assert answer.text == "a plain answer"
    assert answer.model == model_identity(weights)
    assert llm.process.starts == 2


async def test_repeated_crashes_are_refused_without_starting_the_model_again(
    llm: LocalLlamaLLM,
) -> None:
    for _ in range(3):
        with pytest.raises(ModelProcessCrashedError):
            await llm.complete(ask("[segfault] again"))

    with pytest.raises(ModelProcessCrashedError, match="died 3 times in a row") as refused:
        await llm.complete(ask("a question that would not crash"))

    assert "scripts/setup" in str(refused.value)
    assert llm.process.starts == 3


async def test_structured_output_and_its_errors_cross_the_process_boundary(
    weights: Path,
) -> None:
    llm = LocalLlamaLLM(model_path=weights, n_ctx=1024, n_threads=1, child_module=STAND_IN)
    try:
        criticise = ask("Criticise: MD5 for passwords.", max_tokens=512)
        result = await complete_structured(llm, criticise, CriticTurn)
        assert 1 <= result.value.challenge_strength <= 10
        # The grammar is sized in the child, against the model's tokenizer: a prompt that
        # leaves too little of the context window is refused there, and raised here as itself.
        with pytest.raises(SchemaTooLargeError, match="DEBATEBOT_LOCAL_N_CTX"):
            await complete_structured(llm, ask("d" * 3900, max_tokens=512), CriticTurn)
        assert llm.process.starts == 1
    finally:
        await llm.aclose()


async def test_a_model_that_never_answers_is_stopped_at_the_deadline(weights: Path) -> None:
    llm = LocalLlamaLLM(model_path=weights, n_threads=1, timeout_s=1.0, child_module=STAND_IN)
    try:
        with pytest.raises(LLMError, match="DEBATEBOT_LOCAL_TIMEOUT_S"):
            await llm.complete(ask("[hang] take your time"))
        assert (await llm.complete(ask("and now?"))).text == "a plain answer"
    finally:
        await llm.aclose()


async def test_closing_stops_a_call_in_flight_without_calling_it_a_crash(weights: Path) -> None:
    llm = LocalLlamaLLM(model_path=weights, n_threads=1, child_module=STAND_IN)
    call = asyncio.create_task(llm.complete(ask("[hang] take your time")))
    child = await asyncio.to_thread(started, llm.process)

    await llm.aclose()

    with pytest.raises(LLMError, match="shutting down") as stopped:
        await call
    assert not isinstance(stopped.value, ModelProcessCrashedError)
    assert not alive(child)


async def test_a_model_name_the_file_is_not_is_refused_naming_the_setting(
    llm: LocalLlamaLLM,
) -> None:
    with pytest.raises(LLMError, match="DEBATEBOT_LOCAL_MODEL_PATH"):
        await llm.complete(ask("Hello?", model="claude-sonnet-4-5"))
    assert llm.process.starts == 0


def test_the_child_exits_when_its_parent_dies(weights: Path) -> None:
    parent = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from engine.llm import LLMRequest, Message
        from engine.providers.local import LocalLlamaLLM

        llm = LocalLlamaLLM(model_path=Path({str(weights)!r}), child_module={STAND_IN!r})
        request = LLMRequest(
            messages=[Message(role="user", content="hi")], model="tiny-model.Q8_0.gguf"
        )
        asyncio.run(llm.complete(request))
        print(llm.process.pid, flush=True)
        sys.stdin.read()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", parent],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert process.stdout is not None
    child = int(process.stdout.readline())
    assert alive(child)

    process.kill()
    process.wait()

    deadline = time.monotonic() + 60
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the model's process outlived its parent"


def started(process: LlamaProcess) -> int:
    """The pid of `process`'s child once a call has started it (the call runs in a thread)."""
    while process.pid is None:
        time.sleep(0.01)
    return process.pid


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie left for init to reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def enqueue(store: Engine, key: str, spec: DebateSpec) -> int:
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key=key, spec=spec, source=DebateSource.COMMAND)
        )
    assert debate.id is not None
    return debate.id


# Turns stream from the local model: the crash comes before its first piece, or halfway through.
@pytest.mark.parametrize("crash", ["[segfault]", "[segfault-mid-stream]"])
async def test_a_worker_fails_the_debate_that_crashed_and_runs_the_next(
    crash: str,
    store: Engine,
    database_url: str,
    weights: Path,
    llm: LocalLlamaLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(provider="local", local_model_path=weights, judges=1)
    services = build_services(settings)
    identity = model_identity(weights)
    crashing = enqueue(store, "a", services.policy.spec(f"{crash} Should we adopt ADR-9?"))
    fine = enqueue(store, "b", services.policy.spec("Should we adopt ADR-9?"))
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _s: llm,
        prompts=services.prompts,
        config=WorkerConfig(audit_key=KEY),
    )

    assert await worker.run_once()
    assert await worker.run_once()

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        failed = queue.get_debate(session, debate_id=crashing)
        assert (failed.state, failed.outcome) == (DebateState.FINISHED, DebateStatus.FAILED)
        assert failed.error is not None
        assert "killed by SIGSEGV" in failed.error
        assert "scripts/setup" in failed.error
        done = queue.get_debate(session, debate_id=fine)
        assert done.outcome is DebateStatus.COMPLETE
        spec = DebateSpec.model_validate_json(done.spec_json)
        assert {p.model.model for p in spec.participants} == {identity}
        recorded = turns.turn_rows(session, debate_id=fine)
        assert recorded
        assert {(t.provider, t.model) for t in recorded} == {("local", identity)}
        for debate_id in (crashing, fine):
            assert verify.verify_chain(session, debate_id=debate_id, key=KEY).ok
    # `stats` names the model whole (it cut names at 40 characters, inside the hash).
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    capsys.readouterr()
    assert main(["stats"]) == 0
    assert f"local:{identity} " in capsys.readouterr().out
