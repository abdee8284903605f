"""A stand-in for llama-cpp-python's `Llama` that can crash its process the way a mis-built
llama.cpp does, run as the local model's child: `python -m tests.integration.crashing_llama`.

A request whose text holds `[segfault]` kills the process with SIGSEGV (as ggml's AMX code does
on a CPU it was not built for), one holding `[hang]` never answers. Otherwise it keeps to what
llama-cpp-python documents and does: the model file must exist (`ValueError` otherwise), a prompt
longer than the context window is refused with `ValueError`, `max_tokens` bounds the reply, and a
`response_format` schema is answered with a value valid against it (filled by the fake
provider's schema filler), or with plain text without one.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from pathlib import Path
from typing import Any

from engine.providers.fake import fill_schema
from engine.providers.llama_child import main


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
    ) -> dict[str, Any]:
        prompt = "\n".join(m["content"] for m in messages)
        if "[segfault]" in prompt:
            # No core file: the crash is the point, not its dump.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.kill(os.getpid(), signal.SIGSEGV)
        if "[hang]" in prompt:
            while True:
                time.sleep(60)
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
        completion_tokens = max(1, len(text) // 4)
        return {
            "choices": [
                {
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if completion_tokens >= limit else "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }


if __name__ == "__main__":
    main(llama_class=CrashingLlama)
