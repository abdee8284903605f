"""A Chat Completions reply read whole or as a stream, as one `Answer`.

OpenAI's streaming rules this follows (the Chat Completions reference, `stream` and
`stream_options`; the installed SDK's `ChatCompletionChunk` and `ChatCompletionStreamOptionsParam`):
- with `stream: true` the reply comes as `chat.completion.chunk` events, each choice's `delta`
  holding the next piece of `content` (or of `refusal`), the last choice chunk its
  `finish_reason`; the stream ends with `data: [DONE]`, which the SDK consumes;
- `stream_options: {"include_usage": true}` adds one chunk before `[DONE]` whose `usage` covers
  the whole request and whose `choices` is empty ("all other chunks will also include a usage
  field, but with a null value"); "if the stream is interrupted, you may not receive the final
  usage chunk": a stream that ends without a `finish_reason` was cut, and is asked again rather
  than billed as nothing; one that ends whole without that usage came from a server that
  ignores the option (some OpenAI-compatible ones), whose model is then asked whole;
- an error while streaming comes as an SSE `error` event, which the SDK raises as `APIError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from engine.errors import LLMError, StreamRefusedError
from engine.llm import TextSink


@dataclass
class Answer:
    """What a reply said, whichever way it came: its text, a refusal, why it stopped, its usage
    (the SDK's `CompletionUsage`, or None)."""

    text: str
    refusal: str | None
    finish_reason: str | None
    usage: Any


def whole(response: Any, *, what: str) -> Answer:
    """The answer of a `ChatCompletion`; LLMError when it has no choice."""
    if not response.choices:
        raise LLMError(f"{what} returned no choices")
    choice = response.choices[0]
    return Answer(
        text=choice.message.content or "",
        refusal=getattr(choice.message, "refusal", None),
        finish_reason=choice.finish_reason,
        usage=getattr(response, "usage", None),
    )


async def streamed(chunks: Any, on_text: TextSink, *, what: str) -> Answer:
    """The answer of a stream of `ChatCompletionChunk`s (the SDK's `AsyncStream`), telling
    `on_text` the text so far as it grows. A stream cut before its end raises a retryable
    LLMError (the retry starts the text again)."""
    text = ""
    refusal = ""
    finish: str | None = None
    usage: Any = None
    try:
        async for chunk in chunks:
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            if getattr(delta, "refusal", None):
                refusal += delta.refusal
            if delta.content:
                text += delta.content
                await on_text(text)
            if choice.finish_reason is not None:
                finish = choice.finish_reason
    except openai.APIConnectionError:
        # The SDK's error for a connection lost (or timed out) while the body was read.
        finish = None
    if finish is None:
        raise LLMError(
            f"{what}: the stream was cut off before its end ({len(text)} characters in);"
            " asking again",
            retryable=True,
        )
    if usage is None:
        # The stream ended whole (its finish reason, then the SDK's end of stream) but with no
        # usage: the server ignores `stream_options.include_usage`, as some OpenAI-compatible
        # servers do. A call is never recorded as costing nothing it did not report, so the
        # model is asked whole from now on, where every reply carries its usage.
        raise StreamRefusedError(
            f"{what} streamed a whole reply without its usage (the server ignores"
            " stream_options.include_usage); it is asked whole from now on"
        )
    return Answer(text=text, refusal=refusal or None, finish_reason=finish, usage=usage)
