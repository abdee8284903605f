"""A stand-in for llama-cpp-python's `Llama` that can crash its process the way a mis-built
llama.cpp does, run as the local model's child: `python -m tests.integration.crashing_llama`.

A request whose text holds `[segfault]` kills the process with SIGSEGV (as ggml's AMX code does
on a CPU it was not built for), one holding `[hang]` never answers, one holding
`[segfault-mid-stream]` is killed after streaming the first half of its reply, and a streamed
reply to one holding `[gated]` waits after its first piece until the file `STREAM_GATE` (the
environment variable) names exists, so a test sees text before the reply can end. Otherwise it keeps
to what llama-cpp-python documents and does: the model file must exist (`ValueError` otherwise),
a prompt longer than the context window is refused with `ValueError`, `max_tokens` bounds the
reply, and a `response_format` schema is answered with a value valid against it (filled by the
fake provider's schema filler), or with plain text without one. With `stream=True` the reply comes
as llama-cpp-python 0.3.36 streams it: a role chunk with the first piece, a piece (one token, four
bytes here) a chunk, a last chunk with the finish reason and no usage; `n_tokens` (the tokens the
context holds) grows as the real model's does: the prompt before the first piece, then each token
read but the last one sampled (the end token, or the last counted at `max_tokens`).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.providers.fake import fill_schema
from engine.providers.llama_child import main

STREAM_GATE = "DEBATEBOT_TEST_STREAM_GATE"


class CrashingLlama:
    def __init__(
        self,
        *,
        model_path: str,
        n_ctx: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        seed: int = 0,
        verbose: bool = True,
    ) -> None:
        if not Path(model_path).is_file():
            raise ValueError(f"Model path does not exist: {model_path}")
        self.n_ctx = n_ctx
        self.seed = seed
        self.n_tokens = 0

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        """One token per four bytes, like the project's rough estimate."""
        return list(range(len(text) // 4 + int(add_bos)))

    def create_chat_completion(
        self,
        *,
        messages: list[dict[str, str]],
        temperature: float = 0.2,
        max_tokens: int | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        prompt = "\n".join(m["content"] for m in messages)
        if "[segfault]" in prompt:
            segfault()
        if "[hang]" in prompt:
            while True:
                time.sleep(60)
        if stream:
            # llama-cpp-python's stream is a generator: its errors come at the first read.
            return self._stream(prompt, max_tokens, response_format, seed)
        prompt_tokens, text, finish = self._reply(prompt, max_tokens, response_format, seed)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces_of(text))},
        }

    def _reply(
        self,
        prompt: str,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        seed: int | None,
    ) -> tuple[int, str, str]:
        """The prompt's tokens, the reply's text and why it stopped."""
        prompt_tokens = len(self.tokenize(prompt.encode("utf-8")))
        if prompt_tokens > self.n_ctx:
            raise ValueError(
                f"Requested tokens ({prompt_tokens}) exceed context window of {self.n_ctx}"
            )
        schema = (response_format or {}).get("schema")
        text = (
            json.dumps(fill_schema(schema, seed=f"{seed}:{prompt}"))
            if schema is not None
            else "a plain answer"
        )
        limit = max_tokens or self.n_ctx - prompt_tokens
        text = text[: limit * 4]
        return prompt_tokens, text, "length" if len(pieces_of(text)) >= limit else "stop"

    def _stream(
        self,
        prompt: str,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        seed: int | None,
    ) -> Iterator[dict[str, Any]]:
        prompt_tokens, text, finish = self._reply(prompt, max_tokens, response_format, seed)
        pieces = pieces_of(text)
        self.n_tokens = prompt_tokens
        for index, piece in enumerate(pieces):
            if index:
                self.n_tokens += 1  # the previous token, read before this one is sampled
            if "[segfault-mid-stream]" in prompt and index == len(pieces) // 2:
                segfault()
            if index == 0:
                yield chunk({"role": "assistant"}, None)
            elif index == 1 and "[gated]" in prompt:
                wait_for(Path(os.environ[STREAM_GATE]))
            yield chunk({"content": piece}, None)
        if finish == "stop" and pieces:
            self.n_tokens += 1  # the last piece, read before the end token is sampled
        yield chunk({}, finish)


def wait_for(gate: Path) -> None:
    """Until `gate` exists, or a minute has passed (then the test that set it fails)."""
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def pieces_of(text: str) -> list[str]:
    """The reply's tokens: four bytes each."""
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def chunk(delta: dict[str, str], finish: str | None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def segfault() -> None:
    # No core file: the crash is the point, not its dump.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGSEGV)


if __name__ == "__main__":
    main(llama_class=CrashingLlama)
