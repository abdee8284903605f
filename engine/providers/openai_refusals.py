"""What an OpenAI-compatible server's error status refuses, and the adapter's way around it: a
response format it falls back from (`StructuredModeRejected`), or a parameter it stops sending
to that model (`ParameterRefused`, `stop_sending`), each learnt once for the process."""

from __future__ import annotations

import logging
import re

from engine.errors import LLMError
from engine.providers.openai_request import Learned

log = logging.getLogger("debatebot.providers")


class StructuredModeRejected(LLMError):
    """The server refused a response format; the adapter falls back to the next mode."""


class ParameterRefused(LLMError):
    """The server refused a request parameter the adapter can do without (`param`); `sent` says
    whether the refused request carried it, `detail` is the server's status, code and message."""

    def __init__(self, message: str, *, param: str, sent: bool, detail: str) -> None:
        super().__init__(message)
        self.param = param
        self.sent = sent
        self.detail = detail


# How servers word a refused response format: OpenAI-style 400s, vLLM/LiteLLM 422s, and
# llama-cpp-python's 500 carrying pydantic's "Input should be 'text' or 'json_object'".
_MODE_REFUSAL = re.compile(
    r"response_format|json_schema|structured output|guided_json|grammar", re.IGNORECASE
)
_MODE_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})
# OpenAI's 400 for a parameter a model does not take names it in `param`, with code
# `unsupported_parameter` ("Unsupported parameter: 'max_tokens' is not supported with this
# model. Use 'max_completion_tokens' instead.") or `unsupported_value` ("Unsupported value:
# 'temperature' does not support 0 with this model. Only the default (1) value is supported.").
# The parameters the adapter can stop sending, each with what it logs when it does (the model,
# the server's status).
_SWITCH_NOTES = {
    "temperature": "%s refused a temperature (%s); not sending one to it again. A catalogue"
    ' entry with "temperature": false in DEBATEBOT_MODELS_FILE says so from the start',
    "max_tokens": "%s refused max_tokens (%s); sending max_completion_tokens to it from now on",
    "reasoning_effort": "%s refused reasoning_effort (%s); its roles run at the model's default"
    " effort from now on. Remove DEBATEBOT_ROLES__<ROLE>__EFFORT for the roles on this model,"
    " or set a level it takes",
}
_UNSUPPORTED_CODES = frozenset({"unsupported_parameter", "unsupported_value"})
# The same refusal seen only in the message (a proxy that drops `param` and `code`).
_UNSUPPORTED_MESSAGE = re.compile(r"Unsupported (?:parameter|value): '(\w+)'")


def refused_parameter(status: int, param: str | None, code: str | None, message: str) -> str | None:
    """The request parameter a server's error refuses, when it is one the adapter can stop
    sending: by status, `param` and `code` first, by OpenAI's message wording only when the
    body lacks them."""
    if status != 400:
        return None
    # No code is taken as a refusal too: OpenAI's code for an effort level a model lacks is not
    # documented, and its tools-with-effort refusal has none.
    if param in _SWITCH_NOTES and (code is None or code in _UNSUPPORTED_CODES):
        return param
    if not param and not code:
        found = _UNSUPPORTED_MESSAGE.search(message)
        if found and found.group(1) in _SWITCH_NOTES:
            return found.group(1)
    return None


def mode_refused(status: int, param: str | None, message: str) -> bool:
    """Whether an error status refuses the response format the request carried."""
    if status not in _MODE_REFUSAL_STATUSES:
        return False
    return (param or "").startswith("response_format") or bool(_MODE_REFUSAL.search(message))


def stop_sending(learned: Learned, refused: ParameterRefused, *, what: str) -> None:
    """Switch the model (`what` names it) away from the refused parameter, once; a concurrent
    call that was refused the same parameter finds it switched already and just retries."""
    if refused.param not in _SWITCH_NOTES or refused.param in learned.refused:
        return
    learned.refused.add(refused.param)
    log.warning(_SWITCH_NOTES[refused.param], what, refused.detail)


_STREAM_REFUSAL = re.compile(r"\bstream(?:ing|_options)?\b", re.IGNORECASE)


def stream_refused(status: int, param: str | None, message: str) -> bool:
    """Whether a 4xx answer to a streamed request refuses the streaming itself: OpenAI names the
    refused argument in `param` (`stream`, `stream_options`); a compatible server that cannot
    stream says so in its message ("streaming is not supported")."""
    if not 400 <= status < 500 or status in (401, 403, 404, 429):
        return False
    if param in ("stream", "stream_options"):
        return True
    return not param and bool(_STREAM_REFUSAL.search(message[:500]))
