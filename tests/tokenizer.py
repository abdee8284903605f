"""A stand-in for a vendor's byte-level BPE tokenizer, with the properties the budget's input
bound relies on (`engine/llm.py: input_token_bound`, `engine/bound.py`) and no more:

- text is split at line breaks before it is tokenized (a run of line breaks is one token, the
  text between them a piece of its own), so the same piece is the same tokens in any prompt;
- each piece is cut into tokens of 1 to `longest` bytes, where to cut decided by the piece
  alone (a seeded generator), and a share of pieces (`worst_share`) cut into single bytes, the
  worst a byte-level tokenizer can do;
- a request is billed its messages' tokens (the last one with the envelope's instruction after
  it, as the adapters send it), a fixed framing per message and per request, and the schema it
  sends as JSON: the envelope when it carries one (as the hosted adapters send it, and report
  with `Completion.enveloped`), else the role's.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from engine.llm import LLMRequest

_PIECES = re.compile(r"\n+|[^\n]+")
MESSAGE_FRAMING = 4
"""Tokens a message costs beside its text (under the bound's 16)."""
REQUEST_FRAMING = 300
"""Tokens a request costs beside its text and schema (under the bound's 1,000)."""


@dataclass(frozen=True)
class LineTokenizer:
    seed: int = 0
    longest: int = 6
    worst_share: float = 0.2

    def count(self, text: str) -> int:
        total = 0
        for piece in _PIECES.findall(text):
            if piece.startswith("\n"):
                total += 1
                continue
            size = len(piece.encode("utf-8"))
            rng = random.Random(f"{self.seed}\x1f{piece}")
            if rng.random() < self.worst_share:
                total += size
                continue
            cut = 0
            while cut < size:
                cut += rng.randint(1, self.longest)
                total += 1
        return total

    def prompt_tokens(self, request: LLMRequest) -> int:
        """The input tokens `request` is billed for."""
        texts = [m.content for m in request.messages]
        schema = 0
        if request.envelope is not None:
            texts[-1] = f"{texts[-1].rstrip()}\n\n{request.envelope.instruction()}"
            schema = self.count(json.dumps(request.envelope.json_schema))
        elif request.output_schema is not None:
            schema = self.count(json.dumps(request.output_schema))
        words = sum(self.count(text) for text in texts)
        return words + schema + MESSAGE_FRAMING * len(texts) + REQUEST_FRAMING
