"""A call's input bound made tight from what earlier calls of the debate reported.

`engine.llm.input_token_bound` counts one token per UTF-8 byte, about four times what English
costs. Most calls of a debate extend an earlier call's prompt (the same preamble, the debate so
far grown by a turn, a re-ask repeating the request it corrects), and that call's reply said
exactly how many input tokens it was billed for. So a call on the same provider and model whose
prompt starts with an earlier one's is bounded by that call's reported input tokens, plus one
token per byte of what comes after the shared part, plus the per-request allowance: still never
below what the call is billed, since

- the earlier count covers every token of the shared part (and more: its own ending, schema
  and framing, which the new call repeats or replaces with what is counted by the byte);
- the shared part is cut back to the start of a line, and the vendors' byte-level BPE
  tokenizers split text at line breaks before merging (OpenAI's and Anthropic's pre-tokenizers
  keep a line break out of the word after it), so the text from there on is tokenized on its
  own, at most one token per byte;
- a schema other than the earlier call's is counted whole, by the byte, with the per-request
  allowance for its framing; the same schema was counted in the earlier call's tokens;
- each message boundary after the cut gets the per-message allowance, which also covers a line
  break tokenized with the whitespace before it.

Only a count from the same provider and model is used: another model may tokenize differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.llm import (
    MESSAGE_OVERHEAD_TOKENS,
    REQUEST_OVERHEAD_TOKENS,
    Completion,
    LLMRequest,
    beside_messages_bound,
    input_token_bound,
)

PROMPT_SEPARATOR = "\x1e"
"""Between messages of a prompt's flat text: never in a message (control character)."""


def flat_prompt(request: LLMRequest) -> str:
    """The request's messages as one string, roles included, in the order they are sent."""
    return PROMPT_SEPARATOR.join(f"{m.role}\x1f{m.content}" for m in request.messages)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`, by binary search over slice
    comparisons (done in C: a character loop over a long prompt would cost more than the rest
    of a turn)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def line_start(text: str, end: int) -> int:
    """The start of the line `end` falls in (0 when there is no line break before it)."""
    return text.rfind("\n", 0, end) + 1


@dataclass(frozen=True)
class Counted:
    """An earlier call's prompt, what it sent beside it, and the input tokens its provider
    reported for it."""

    prompt: str
    envelope_schema: dict[str, Any] | None
    """The envelope's schema when the provider sent it (`Completion.enveloped`)."""
    output_schema: dict[str, Any] | None
    """The role's schema when the provider sent that instead."""
    left_out_envelope: bool
    """The request carried an envelope the provider did not send (it sends the role's)."""
    input_tokens: int

    def same_schema(self, request: LLMRequest) -> bool:
        """Whether `request`, to the same model, sends what this call sent beside its messages:
        a provider that sent the envelope sends it again on a request carrying the same one (the
        key it names is in the instruction, after the messages, counted apart); one that sent
        the role's schema sends that, and, when it left out an envelope, leaves it out again.
        The dicts are compared by value; each is one shared dict per type or protocol, so
        mostly by identity."""
        if self.envelope_schema is not None:
            return request.envelope is not None and (
                request.envelope.json_schema == self.envelope_schema
            )
        if request.envelope is not None and not self.left_out_envelope:
            return False
        return request.output_schema == self.output_schema


@dataclass
class PromptHistory:
    """The prompts of a debate's answered calls, by provider and model, with their reported
    input tokens: what a later call's bound is tightened from."""

    counted: dict[tuple[str, str], list[Counted]] = field(default_factory=dict)

    def record(self, provider: str, request: LLMRequest, completion: Completion) -> None:
        """`request` to `provider` was answered with `completion` (its usage counts the input
        tokens it was billed for; `enveloped`, whether the envelope was sent)."""
        sent = request.envelope if completion.enveloped else None
        entry = Counted(
            prompt=flat_prompt(request),
            envelope_schema=sent.json_schema if sent is not None else None,
            output_schema=None if sent is not None else request.output_schema,
            left_out_envelope=request.envelope is not None and sent is None,
            input_tokens=completion.usage.input_tokens,
        )
        self.counted.setdefault((provider, request.model), []).append(entry)

    def bound(self, provider: str, request: LLMRequest) -> int:
        """At most how many input tokens `request` can be billed: the byte bound, or less when
        its prompt extends one an earlier call on the same model reported (module docstring)."""
        loose = input_token_bound(request)
        earlier = self.counted.get((provider, request.model))
        if not earlier:
            return loose
        prompt = flat_prompt(request)
        beside = beside_messages_bound(request) + REQUEST_OVERHEAD_TOKENS
        instruction = 0
        if request.envelope is not None:
            # Sent after the last message, so never part of the shared lines.
            instruction = len(request.envelope.instruction().encode("utf-8"))
        best = loose
        for counted in earlier:
            shared = line_start(prompt, common_prefix(prompt, counted.prompt))
            if shared == 0:
                continue
            # What follows the shared lines, by the byte, with a message's allowance for each
            # message it starts or ends (a line cut near a message's framing).
            rest = len(prompt[shared:].encode("utf-8"))
            rest += MESSAGE_OVERHEAD_TOKENS * (prompt.count(PROMPT_SEPARATOR, shared) + 1)
            rest += instruction
            if not counted.same_schema(request):
                rest += beside
            best = min(best, counted.input_tokens + rest)
        return best
