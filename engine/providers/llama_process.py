"""The local model's child process, seen from the process that uses it.

llama.cpp is native code: a fault in it (a segmentation fault in ggml's AMX path when llama.cpp
was compiled for another CPU, ggml-org/llama.cpp#20824) ends the process it runs in, with no
Python exception and no message. So the model runs in a child process
(`engine.providers.llama_child`), one per `LlamaProcess`, which loads the model once and answers
one request at a time over its stdin and stdout: length-prefixed JSON frames. When the child dies
the call fails with `ModelProcessCrashedError`, naming the fix; the next call starts a new child.
After `MAX_CONSECUTIVE_CRASHES` deaths with no answer between them, calls are refused at once
with the same advice instead of starting a child that will die again. The child exits when its
stdin reaches end of file, so it never outlives this process by more than its current call.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from engine.errors import (
    LLMError,
    ModelProcessCrashedError,
    ProviderUnavailableError,
    SchemaTooLargeError,
)

FRAME_HEADER = struct.Struct(">I")
"""Each frame: its length in 4 bytes, big-endian, then that many bytes of UTF-8 JSON."""
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame either side accepts: a request is at most the context window's text, a
reply at most `max_tokens` of text, both far below it."""
MAX_CONSECUTIVE_CRASHES = 3
CHILD_MODULE = "engine.providers.llama_child"
START_TIMEOUT_S = 300.0
"""The least time a child has to start and load its model (a large GGUF file from a slow disk),
however short the calls' own deadline."""
EXIT_WAIT_S = 5.0
"""How long a child that was told to stop (stdin closed) or died is waited for."""
REBUILD_ADVICE = (
    "llama.cpp was probably compiled for another CPU (a plain `pip install` builds it for the"
    " machine it runs on, with instructions such as AMX whose code crashes on some virtual"
    " machines). Rebuild it portably: run `scripts/setup`, or `CMAKE_ARGS=-DGGML_NATIVE=OFF pip"
    " install --force-reinstall --no-cache-dir llama-cpp-python`"
)
ERROR_KINDS: dict[str, type[LLMError]] = {
    cls.__name__: cls for cls in (LLMError, ProviderUnavailableError, SchemaTooLargeError)
}
"""The errors a child reports that are raised again here as themselves."""


def encode_frame(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise LLMError(
            f"a message to or from the local model's process is {len(body):,} bytes, over the"
            f" {MAX_FRAME_BYTES:,} a frame may hold"
        )
    return FRAME_HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a frame header announces; refuses one over `MAX_FRAME_BYTES`."""
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise LLMError(f"the local model's process sent a frame of {length:,} bytes, over the cap")
    return int(length)


def death_of(code: int | None) -> str:
    """How a child ended, as people read it: a signal by name, or an exit status."""
    if code is None:
        return "its exit status is unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        described = {"SIGSEGV": ", a segmentation fault", "SIGABRT": ", an abort"}.get(name, "")
        return f"killed by {name}{described}"
    return f"exited with status {code}"


class ChildDied(Exception):
    """The child's pipes closed under a call (internal: becomes ModelProcessCrashedError)."""


class LlamaProcess:
    """One child process holding the model, started on the first call and again after a death.

    `config` is the child's first frame (model file, context, threads, seed); `module` the child's
    entry point (`python -m module`), replaceable so tests can run a stand-in model that crashes.
    Calls are serialised: one request and its reply at a time, each within `timeout_s`.
    """

    def __init__(
        self,
        config: dict[str, Any],
        *,
        module: str = CHILD_MODULE,
        timeout_s: float = 600.0,
        max_crashes: int = MAX_CONSECUTIVE_CRASHES,
    ) -> None:
        self.config = config
        self.module = module
        self.timeout_s = timeout_s
        self.max_crashes = max_crashes
        self.crashes = 0
        self.last_death = ""
        self.starts = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closing = False
        self._interrupted = False

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def call(
        self, request: dict[str, Any], on_partial: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """The child's answer to `request`; raises what the child reported, or
        ModelProcessCrashedError when it died, or LLMError when it overran `timeout_s`. With
        `on_partial`, the child streams: each piece of text it sends before its answer is told
        to `on_partial`, all within the same deadline and at most `MAX_FRAME_BYTES` of them."""
        with self._lock:
            self._interrupted = False
            self._refuse_after_crashes()
            try:
                child = self._running()
                self._send(child, {"request": request, "stream": on_partial is not None})
                reply = self._reply(child, on_partial)
            except ChildDied:
                raise self._died("while generating") from None
            self.crashes = 0
            return self._answer(reply)

    def _reply(
        self, child: subprocess.Popen[bytes], on_partial: Callable[[str], None] | None
    ) -> dict[str, Any]:
        """The child's last frame for the request just sent, the pieces of text before it told
        to `on_partial`. A reply not read to its end stops the child: what it sent next would
        be taken for the next call's answer."""
        deadline = time.monotonic() + self.timeout_s
        streamed = 0
        try:
            reply = self._receive(child, deadline)
            while "partial" in reply:
                piece = reply["partial"]
                if on_partial is None or not isinstance(piece, str):
                    raise LLMError(
                        "the local model's process sent a piece of text it was not asked to"
                        " stream; its process was stopped and a new one starts with the next call"
                    )
                # Each piece counts its frame's header too, so empty pieces cannot go on forever.
                streamed += FRAME_HEADER.size + len(piece.encode("utf-8"))
                if streamed > MAX_FRAME_BYTES:
                    raise LLMError(
                        f"the local model's process streamed over {MAX_FRAME_BYTES:,} bytes for"
                        " one reply; its process was stopped and a new one starts with the next"
                        " call"
                    )
                on_partial(piece)
                reply = self._receive(child, deadline)
        except ChildDied:
            raise
        except BaseException:
            self._stop(kill=True)
            raise
        return reply

    def close(self) -> None:
        """Stop the child: its stdin closes and it exits; killed if it does not in time, or at
        once when a call still holds it (shutdown does not wait out a generation)."""
        self._closing = True
        if self._lock.acquire(timeout=1.0):
            try:
                self._stop(kill=False)
            finally:
                self._lock.release()
            return
        child = self._child
        if child is not None and child.poll() is None:
            # Only killed here: the call holding the pipes sees them end and reaps the child
            # (closing them under its feet could hand their numbers to another file).
            child.kill()

    def interrupt(self) -> None:
        """Abandon the generation in flight: its caller was cancelled (a person stopped the
        debate, issue 44). llama.cpp cannot be stopped mid-generation from outside, so the child
        is killed; the abandoned call ends with an error nobody awaits, not counted as a crash,
        and the next call starts a fresh child. Nothing happens when no call holds the child."""
        child = self._child
        if child is not None and child.poll() is None and self._lock.locked():
            self._interrupted = True
            child.kill()

    def _refuse_after_crashes(self) -> None:
        if self.crashes >= self.max_crashes:
            raise ModelProcessCrashedError(
                f"the local model's process died {self.crashes} times in a row ({self.last_death});"
                f" the local model is refused in this process until it restarts. {REBUILD_ADVICE},"
                " then restart debatebot"
            )

    def _running(self) -> subprocess.Popen[bytes]:
        """The live child, started and its model loaded when there is none."""
        if self._child is not None and self._child.poll() is None:
            return self._child
        self._child = None
        child = subprocess.Popen(
            [sys.executable, "-m", self.module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=child_environment(),
            close_fds=True,
        )
        self._child = child
        self.starts += 1
        try:
            self._send(child, {"config": self.config})
            ready = self._receive(child, time.monotonic() + max(self.timeout_s, START_TIMEOUT_S))
        except ChildDied:
            raise self._died("while loading the model") from None
        if ready.get("ready") is not True:
            self._stop(kill=False)
            self._answer(ready)
            raise LLMError("the local model's process did not say it was ready")
        return child

    def _send(self, child: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
        stdin = _pipe(child.stdin)
        try:
            stdin.write(encode_frame(message))
            stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise ChildDied from error

    def _receive(self, child: subprocess.Popen[bytes], deadline: float) -> dict[str, Any]:
        stdout = _pipe(child.stdout)
        header = self._read(stdout, FRAME_HEADER.size, deadline)
        body = self._read(stdout, frame_length(header), deadline)
        try:
            message = json.loads(body.decode("utf-8"))
        except ValueError as error:
            raise LLMError(
                f"the local model's process sent a frame that is not JSON: {error}"
            ) from error
        if not isinstance(message, dict):
            raise LLMError("the local model's process sent something other than a JSON object")
        return message

    def _read(self, stdout: IO[bytes], size: int, deadline: float) -> bytes:
        """Exactly `size` bytes from the child before `deadline`: the pipe's raw descriptor is
        polled, so a hung child is stopped rather than waited on forever."""
        chunks: list[bytes] = []
        wanted = size
        descriptor = stdout.fileno()
        # poll, not select: a busy server's descriptors can number past select's 1024.
        poller = select.poll()
        poller.register(descriptor, select.POLLIN)
        while wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop(kill=True)
                raise LLMError(
                    f"the local model gave no answer in time ({self.timeout_s:g} s a call, at"
                    f" least {START_TIMEOUT_S:g} s to start); its process was stopped and a new"
                    " one starts with the next call. Raise DEBATEBOT_LOCAL_TIMEOUT_S for a"
                    " larger model or a slower machine"
                )
            if not poller.poll(left * 1000):
                continue
            try:
                chunk = os.read(descriptor, min(wanted, 1 << 20))
            except OSError as error:
                raise ChildDied from error
            if not chunk:
                raise ChildDied
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)

    def _died(self, doing: str) -> LLMError:
        """The error of a child that died `doing` something, after reaping it."""
        code = self._stop(kill=True)
        if self._interrupted:
            return LLMError("the local model's call was abandoned: its debate was stopped")
        if self._closing:
            return LLMError("the local model's process was stopped: this process is shutting down")
        self.crashes += 1
        self.last_death = death_of(code)
        again = (
            "starts the model again for the next call"
            if self.crashes < self.max_crashes
            else f"after {self.crashes} such deaths in a row, refuses the local model until it"
            " restarts"
        )
        return ModelProcessCrashedError(
            f"the local model's process died {doing} ({self.last_death}); debatebot goes on,"
            f" and {again}. {REBUILD_ADVICE}"
        )

    def _stop(self, *, kill: bool) -> int | None:
        """End the child (close its stdin; kill it if asked or if it lingers); its exit code."""
        child, self._child = self._child, None
        if child is None:
            return None
        if kill and child.poll() is None:
            child.kill()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                # A pipe the dead child left broken: nothing more to flush.
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            return child.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait()

    def _answer(self, reply: dict[str, Any]) -> dict[str, Any]:
        error = reply.get("error")
        if isinstance(error, dict):
            kind = ERROR_KINDS.get(str(error.get("kind")), LLMError)
            raise kind(str(error.get("message", "the local model failed")))
        answer = reply.get("response", reply)
        if not isinstance(answer, dict):
            raise LLMError("the local model's process sent an answer that is not a JSON object")
        return answer


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:
        raise ChildDied
    return stream


def child_environment() -> dict[str, str]:
    """This process's environment, with the directory this code was imported from first on the
    child's import path, so the child runs the same code (not another installed copy)."""
    root = str(Path(__file__).resolve().parents[2])
    environment = dict(os.environ)
    rest = environment.get("PYTHONPATH", "")
    environment["PYTHONPATH"] = root + (os.pathsep + rest if rest else "")
    return environment
