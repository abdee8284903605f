"""A local model's child process that breaks the frame protocol on purpose, run as
`python -m tests.integration.scripted_llama_child`: its configuration's `script` says how it
answers each request (after the usual ready frame), so the parent's bounds are tried:

- `cut`: two pieces of text, then half a frame, then it exits (a stream cut off mid-frame);
- `unasked`: a piece of text to a request that did not ask for a stream;
- `not-text`: a piece that is a number, not text;
- `flood`: pieces of text until past the cap on one reply's streamed text.
"""

from __future__ import annotations

import sys
from typing import IO

from engine.providers.llama_child import read_frame
from engine.providers.llama_process import FRAME_HEADER, MAX_FRAME_BYTES, encode_frame


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    def send(frame: bytes) -> None:
        stdout.write(frame)
        stdout.flush()

    first = read_frame(stdin)
    if not isinstance(first, dict):
        return
    script = first["config"]["script"]
    send(encode_frame({"ready": True}))
    while read_frame(stdin) is not None:
        if script == "cut":
            send(encode_frame({"partial": '{"thesis": "MD5'}))
            send(encode_frame({"partial": " is broken"}))
            send(encode_frame({"partial": " for passwords"})[: FRAME_HEADER.size + 5])
            return
        if script == "unasked":
            send(encode_frame({"partial": "text nobody asked to stream"}))
        elif script == "not-text":
            send(encode_frame({"partial": 5}))
        elif script == "flood":
            piece = "x" * (1 << 20)
            for _ in range(MAX_FRAME_BYTES // len(piece) + 2):
                send(encode_frame({"partial": piece}))
        send(encode_frame({"response": {"choices": [], "usage": {}}}))


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
