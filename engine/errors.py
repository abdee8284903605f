"""The engine's exception hierarchy: every error says what went wrong and how to fix it."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""


class SpecError(EngineError, ValueError):
    """A debate specification that cannot be run (too many rounds, empty question, ...)."""


class PromptIntegrityError(EngineError):
    """A prompt file is missing or differs from the hash pinned in the lock file."""


class LLMError(EngineError):
    """A model call failed; `retryable` says whether trying again later may help.

    `retry_after_s` carries the server's `Retry-After` when it sent one, so the retry loop waits
    as long as the server asked rather than guessing.
    """

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class RetriesExhaustedError(LLMError):
    """A retryable failure that kept happening until the attempts or the time budget ran out."""


class ModelNotAvailableError(LLMError):
    """The vendor answered 404 for the model: retired, misspelt, or not open to this key."""


class ProviderUnavailableError(LLMError):
    """A provider cannot be constructed here (missing package, key or model file)."""


class StructuredOutputError(LLMError):
    """The model's output never validated against the requested schema within the attempts."""

    def __init__(self, message: str, *, raw_outputs: list[str]) -> None:
        super().__init__(message, retryable=False)
        self.raw_outputs = raw_outputs


class DebateHaltedError(LLMError):
    """The run was stopped from outside before its next model call, for example because the
    place its results go can no longer be reached; protocols end FAILED with this reason, as
    after a model failure, so nothing more is spent."""


class SchemaTooLargeError(LLMError):
    """An output schema whose longest reply cannot be bounded to fit the call's `max_tokens`
    under a constrained decoder's grammar: a design error (split the call) or a setting to
    raise."""


class ModelProcessCrashedError(LLMError):
    """The process a local model generates in died under a call (a native crash in llama.cpp, or
    a kill): the caller's process goes on, and the error names the cause and the fix."""


class StreamRefusedError(LLMError):
    """A provider could not stream this call (the server refused a streamed request, or the
    model cannot stream) before any of its output was shown: the engine asks for the whole
    reply instead, as it does of a provider that never streams."""
