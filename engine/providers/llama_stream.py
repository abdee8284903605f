"""The local model's reply as it is written: read from llama-cpp-python in the child process,
relayed frame by frame to the parent (`engine.providers.llama_process`), and told there to the
engine as the text so far, as every streaming provider tells it (`engine.llm.StreamingLLM`).

llama-cpp-python's streaming, as the installed 0.3.36 does it (`Llama._create_completion` and
`llama_chat_format._convert_text_completion_chunks_to_chat`): `create_chat_completion(...,
stream=True)` returns an iterator of `chat.completion.chunk` dicts, the grammar of the request's
`response_format` constraining generation as in a whole call. The first chunk says only the role,
and comes with the first generated text; each later one holds the next piece of text in
`delta.content`, and the last an empty delta and the `finish_reason`. No chunk carries a usage,
so the child counts it from the model's own context (`streamed_reply`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any

from engine.errors import LLMError
from engine.llm import TextSink

PieceSink = Callable[[str], None]
"""Told each piece of a reply's text as the model writes it (in the child, or in the parent's
worker thread that reads the child's frames)."""


def streamed_reply(
    llama: Any, chunks: Iterable[dict[str, Any]], on_piece: PieceSink
) -> dict[str, Any]:
    """The response of a streamed chat completion, shaped as a whole call's (its text, its
    finish reason and its usage), telling `on_piece` each piece of text as it comes.

    The usage is the model's own count of its tokens, `Llama.n_tokens` (the tokens its context
    holds): when the first chunk comes, the model has read the whole prompt and sampled the
    reply's first token, not yet read it; when the stream ends, the context holds the prompt and
    every token generated but the last one sampled, which is never read. That last token is the
    end-of-generation token when the reply ended with "stop" (llama-cpp-python's usage does not
    count it) and the last counted token when it ended at "length". Re-tokenizing the text
    instead would undercount: the grammar makes the model write pieces its tokenizer would join
    (18 tokens generated, 16 re-tokenized, on a SmolLM2 reply).
    """
    pieces: list[str] = []
    prompt_tokens: int | None = None
    finish: str | None = None
    for chunk in chunks:
        if prompt_tokens is None:
            prompt_tokens = int(llama.n_tokens)
        choice = chunk["choices"][0]
        piece = choice["delta"].get("content")
        if piece:
            pieces.append(piece)
            on_piece(piece)
        if choice.get("finish_reason") is not None:
            finish = str(choice["finish_reason"])
    if prompt_tokens is None or finish is None:
        raise LLMError("the local model's stream ended before its reply did")
    completion_tokens = int(llama.n_tokens) - prompt_tokens + (1 if finish == "length" else 0)
    return {
        "choices": [
            {
                "message": {"role": "assistant", "content": "".join(pieces)},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class Relay:
    """The text a call's worker thread hears from the child, handed to the event loop: the
    thread appends each piece (`heard`), the loop tells `on_text` the text so far, as often as
    it gets to it (pieces that came meanwhile are told at once)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pieces: list[str] = []
        self._lock = threading.Lock()
        self._grew = asyncio.Event()

    def heard(self, piece: str) -> None:
        """In the worker thread: one more piece of the reply."""
        with self._lock:
            self.pieces.append(piece)
        self.loop.call_soon_threadsafe(self._grew.set)

    async def follow(
        self, call: asyncio.Future[dict[str, Any]], on_text: TextSink
    ) -> dict[str, Any]:
        """`call`'s answer, telling `on_text` the text so far each time it grew meanwhile (and
        once more with all of it, should the last pieces come with the answer)."""
        told = 0
        while True:
            with self._lock:
                heard = len(self.pieces)
                text = "".join(self.pieces) if heard > told else ""
            if heard > told:
                told = heard
                await on_text(text)
            if call.done():
                return call.result()
            grew: asyncio.Future[Any] = asyncio.ensure_future(self._grew.wait())
            try:
                await asyncio.wait((call, grew), return_when=asyncio.FIRST_COMPLETED)
            finally:
                grew.cancel()
            self._grew.clear()
