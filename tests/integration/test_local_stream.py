"""The local model streams: its child process sends each piece of text as the model writes it,
and the engine is told the text so far, as every streaming provider tells it.

The child here is a stand-in (tests/integration/crashing_llama.py streams as llama-cpp-python
does; tests/integration/scripted_llama_child.py breaks the frame protocol on purpose), so the
framing, the caps, a stream cut off and a crash mid-stream are tried in seconds; the real model
streams in tests/integration/test_local_model.py.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.errors import LLMError, ModelProcessCrashedError
from engine.llm import LLMRequest, Message, StreamingLLM, output_schema
from engine.models import CriticTurn
from engine.providers.llama_process import LlamaProcess
from engine.providers.local import LocalLlamaLLM
from tests.integration.crashing_llama import STREAM_GATE

STAND_IN = "tests.integration.crashing_llama"
SCRIPTED = "tests.integration.scripted_llama_child"
MODEL = "tiny-model.Q8_0.gguf"


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    path = tmp_path / MODEL
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


@pytest.fixture
async def llm(weights: Path) -> AsyncIterator[LocalLlamaLLM]:
    local = LocalLlamaLLM(model_path=weights, n_threads=1, child_module=STAND_IN)
    yield local
    await local.aclose()


def ask(text: str, max_tokens: int = 512, *, schema: bool = True) -> LLMRequest:
    return LLMRequest(
        messages=[Message(role="user", content=text)],
        model=MODEL,
        max_tokens=max_tokens,
        output_schema=output_schema(CriticTurn) if schema else None,
        schema_name="CriticTurn" if schema else None,
    )


class Heard:
    """What a stream told: the text so far, each time."""

    def __init__(self, gate: Path | None = None) -> None:
        self.texts: list[str] = []
        self.gate = gate

    async def __call__(self, text: str) -> None:
        self.texts.append(text)
        if self.gate is not None:
            self.gate.touch()


async def test_text_arrives_before_the_reply_ends_and_the_reply_is_what_was_streamed(
    llm: LocalLlamaLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-in holds its reply after the first piece until the first text was heard here.
    gate = tmp_path / "heard"
    monkeypatch.setenv(STREAM_GATE, str(gate))
    heard = Heard(gate)
    assert isinstance(llm, StreamingLLM)
    assert llm.streams(ask("x"))

    completion = await llm.stream(ask("[gated] Criticise: MD5 for passwords."), heard)

    assert len(heard.texts) >= 2
    first = heard.texts[0]
    assert first
    assert len(first) < len(completion.text)
    assert completion.text.startswith(first)
    for shorter, longer in itertools.pairwise(heard.texts):
        assert longer.startswith(shorter)
        assert len(longer) > len(shorter)
    assert heard.texts[-1] == completion.text
    CriticTurn.model_validate_json(completion.text)


async def test_a_streamed_call_is_billed_the_usage_its_whole_call_reports(
    llm: LocalLlamaLLM,
) -> None:
    ended = ask("Criticise: MD5 for passwords.")
    cut = ask("Is MD5 fine?", max_tokens=2, schema=False)
    for request, finish in ((ended, "stop"), (cut, "length")):
        whole = await llm.complete(request)
        streamed = await llm.stream(request, Heard())

        assert streamed.text == whole.text
        assert streamed.finish_reason == whole.finish_reason == finish
        assert streamed.usage == whole.usage
        assert streamed.usage.input_tokens > 0
        assert streamed.usage.output_tokens > 0


async def test_a_crash_mid_stream_fails_the_call_with_the_fix_and_the_next_call_streams(
    llm: LocalLlamaLLM,
) -> None:
    heard = Heard()
    with pytest.raises(ModelProcessCrashedError) as crashed:
        await llm.stream(ask("[segfault-mid-stream] Criticise: MD5."), heard)

    assert "died while generating (killed by SIGSEGV, a segmentation fault)" in str(crashed.value)
    assert "scripts/setup" in str(crashed.value)
    assert heard.texts, "the first half was streamed before the crash"
    again = Heard()
    completion = await llm.stream(ask("Criticise: MD5."), again)
    assert again.texts[-1] == completion.text
    assert llm.process.starts == 2


def scripted(weights: Path, script: str) -> LlamaProcess:
    return LlamaProcess({"script": script, "model_path": str(weights)}, module=SCRIPTED)


def test_a_stream_cut_off_mid_frame_is_a_crash_and_the_next_call_starts_a_new_child(
    weights: Path,
) -> None:
    process = scripted(weights, "cut")
    pieces: list[str] = []
    try:
        with pytest.raises(ModelProcessCrashedError, match="died while generating"):
            process.call({"request": "x"}, pieces.append)
        assert pieces == ['{"thesis": "MD5', " is broken"]
        with pytest.raises(ModelProcessCrashedError):
            process.call({"request": "x"}, pieces.append)
        assert process.starts == 2
    finally:
        process.close()


@pytest.mark.parametrize(
    ("script", "streams", "problem"),
    [
        ("unasked", False, "a piece of text it was not asked to stream"),
        ("not-text", True, "a piece of text it was not asked to stream"),
        ("flood", True, "streamed over 67,108,864 bytes for one reply"),
    ],
)
def test_a_child_that_breaks_the_stream_is_stopped(
    weights: Path, script: str, streams: bool, problem: str
) -> None:
    process = scripted(weights, script)
    try:
        with pytest.raises(LLMError, match=problem) as broken:
            process.call({"request": "x"}, (lambda piece: None) if streams else None)
        assert not isinstance(broken.value, ModelProcessCrashedError)
        # Stopped: what it sent next would have been read as the next call's answer.
        assert process.pid is None
        assert process.crashes == 0
    finally:
        process.close()
