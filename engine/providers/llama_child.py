"""The local model's child process: `python -m engine.providers.llama_child`.

It reads frames from stdin (`engine.providers.llama_process` writes them): first the model's
configuration, answered `{"ready": true}` once the model is loaded (or with the error), then
one request per frame, each answered with llama-cpp-python's response or the error the call
raised; a request sent with `"stream": true` has each piece of its text sent first, a frame
`{"partial": text}` each, as the model writes it (`engine.providers.llama_stream`). It exits
when stdin ends: its parent closed it, or died.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import IO, Any

from engine.errors import LLMError
from engine.llm import LLMRequest
from engine.providers.llama_process import FRAME_HEADER, encode_frame, frame_length
from engine.providers.local import LlamaConfig, LlamaSession


def read_frame(stdin: IO[bytes]) -> Any | None:
    """The next frame's message, or None at the end of stdin."""
    header = stdin.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    length = frame_length(header)
    body = stdin.read(length)
    if len(body) < length:
        return None
    return json.loads(body.decode("utf-8"))


def error_frame(error: Exception) -> dict[str, Any]:
    """An error as the parent raises it again: its class when it is one of the engine's."""
    kind = type(error).__name__ if isinstance(error, LLMError) else "LLMError"
    message = str(error) if isinstance(error, LLMError) else f"the local model failed: {error!r}"
    return {"error": {"kind": kind, "message": message}}


def session_of(config: dict[str, Any], llama_class: Any) -> LlamaSession:
    return LlamaSession(LlamaConfig.from_frame(config), llama_class=llama_class)


def serve(stdin: IO[bytes], stdout: IO[bytes], *, llama_class: Any = None) -> None:
    """Answer frames until stdin ends. `llama_class` replaces `llama_cpp.Llama` (tests)."""

    def send(message: dict[str, Any]) -> None:
        stdout.write(encode_frame(message))
        stdout.flush()

    first = read_frame(stdin)
    if not isinstance(first, dict) or not isinstance(first.get("config"), dict):
        return
    session = session_of(first["config"], llama_class)
    try:
        session.load()
    except LLMError as error:
        send(error_frame(error))
        return
    send({"ready": True})
    while (message := read_frame(stdin)) is not None:
        try:
            request = LLMRequest.model_validate(message["request"])
            streams = message.get("stream") is True
            on_piece = (lambda piece: send({"partial": piece})) if streams else None
            send({"response": session.generate(request, on_piece)})
        except Exception as error:  # noqa: BLE001 - every failure goes back to the parent as a reply
            send(error_frame(error))


def main(llama_class: Any = None) -> None:
    """Run as the child: the frames go over the original stdout, and anything else written to
    it (a print, llama.cpp's own output) goes to stderr instead, so it cannot break a frame."""
    # The terminal's Ctrl-C reaches the whole process group: the parent decides when this
    # process stops (by closing stdin), so an interrupted CLI is not reported as a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    frames = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, frames, llama_class=llama_class)


if __name__ == "__main__":
    main()
