"""The turn hash chain: each turn's hash covers its content and the previous turn's hash.

Changing, removing or reordering any stored turn breaks every later link, and `verify_chain`
names the first broken one.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC

from bot.store.tables import Turn

GENESIS_HASH = "0" * 64


def turn_digest(turn: Turn, prev_hash: str) -> str:
    """sha256 over the previous hash and a canonical JSON of every audited field of `turn`."""
    payload = {
        "debate_id": turn.debate_id,
        "seq": turn.seq,
        "round": turn.round,
        "role": turn.role,
        "attempt": turn.attempt,
        "provider": turn.provider,
        "model": turn.model,
        "prompt_sha256": turn.prompt_sha256,
        "request_sha256": turn.request_sha256,
        "input_tokens": turn.input_tokens,
        "output_tokens": turn.output_tokens,
        "cached_input_tokens": turn.cached_input_tokens,
        "cost_usd": repr(float(turn.cost_usd)),
        "latency_s": repr(float(turn.latency_s)),
        "reasks": turn.reasks,
        "raw_text": turn.raw_text,
        "parsed_json": turn.parsed_json,
        "created_at": turn.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
    }
    # Added in schemas 0003 and 0004: hashed only when set, so chains written before verify.
    if turn.cache_write_input_tokens:
        payload["cache_write_input_tokens"] = turn.cache_write_input_tokens
    if turn.speaker:
        payload["speaker"] = turn.speaker
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{prev_hash}\n{canonical}".encode()).hexdigest()
