"""The vendors' prompt caches as the cost benchmark simulates them (benchmarks/vendor_cache.py),
on hand-computed cases: minimum lengths, prefix reads, what invalidates a cache, Anthropic's
breakpoints and lookback, TTLs, and the write surcharge and read discount priced right.

Texts are runs of one letter, so a block of 4·n bytes is n tokens."""

from __future__ import annotations

import pytest

from benchmarks.vendor_cache import (
    AnthropicCache,
    Block,
    CacheRuleError,
    Call,
    IdealCache,
    OpenAICache,
    Part,
    anthropic_call,
    anthropic_min_tokens,
    openai_call,
    simulate,
)
from engine.pricing import Pricing

PRICE = Pricing(
    input_per_mtok=1.0, output_per_mtok=5.0, cached_input_per_mtok=0.1, cache_write_per_mtok=1.25
)
NO_WRITE_PRICE = Pricing(input_per_mtok=1.0, output_per_mtok=5.0, cached_input_per_mtok=0.1)


def text(letter: str, tokens: int) -> str:
    return letter * (4 * tokens)


def block(
    letter: str,
    tokens: int,
    *,
    part: Part = Part.TEXT,
    in_messages: bool = False,
    breakpoint: str | None = None,
) -> Block:
    return Block(text(letter, tokens), part, in_messages, breakpoint)


def call(
    *blocks: Block, model: str = "m", at: float = 0.0, vendor: str = "openai", settings: str = ""
) -> Call:
    """A call of 10 output tokens that takes 30 s."""
    return Call(
        vendor=vendor,
        model=model,
        blocks=blocks,
        output_tokens=10,
        at=at,
        done=at + 30,
        settings=settings,
    )


def usd(*, uncached: float = 0, read: float = 0, write: float = 0, write_1h: float = 0) -> float:
    """The bill at PRICE of the given input tokens plus the 10 output tokens every call has."""
    return (uncached * 1.0 + read * 0.1 + write * 1.25 + write_1h * 2.0 + 10 * 5.0) / 1e6


def openai(price: Pricing = PRICE) -> OpenAICache:
    return OpenAICache(lambda _vendor, _model: price)


def anthropic(minimum: int = 512) -> AnthropicCache:
    return AnthropicCache(lambda _vendor, _model: PRICE, min_tokens=lambda _model: minimum)


# OpenAI


def test_openai_caches_nothing_below_1024_tokens() -> None:
    cache = openai()
    first = cache.bill(call(block("s", 1_000), block("u", 10)))
    second = cache.bill(call(block("s", 1_000), block("u", 10), at=30))
    for bill in (first, second):
        assert (bill.read_tokens, bill.write_tokens) == (0, 0)
        assert bill.usd == pytest.approx(usd(uncached=1_010))


def test_openai_reads_a_prefix_sent_before_in_128_token_steps_and_bills_the_writes() -> None:
    cache = openai()
    first = cache.bill(call(block("s", 1_500), block("x", 100)))
    # 1,600 tokens: 1,536 of them (12 steps of 128) written at 1.25×, 64 plain.
    assert (first.read_tokens, first.write_tokens) == (0, 1_536)
    assert first.usd == pytest.approx(usd(uncached=64, write=1_536))
    second = cache.bill(call(block("s", 1_500), block("y", 100), at=30))
    # 1,500 tokens shared, read in steps of 128: 1,408; the rest of its 1,536 cacheable written.
    assert (second.read_tokens, second.write_tokens) == (1_408, 128)
    assert second.usd == pytest.approx(usd(uncached=64, read=1_408, write=128))


def test_openai_cannot_read_what_a_request_in_flight_is_writing() -> None:
    cache = openai()
    cache.bill(call(block("s", 1_500), block("x", 100)))
    together = cache.bill(call(block("s", 1_500), block("y", 100), at=10))
    assert together.read_tokens == 0


def test_openai_a_different_schema_at_the_front_invalidates_everything_after_it() -> None:
    cache = openai()
    cache.bill(call(block("a", 200, part=Part.SCHEMA), block("s", 1_500)))
    other = cache.bill(call(block("b", 200, part=Part.SCHEMA), block("s", 1_500), at=30))
    assert other.read_tokens == 0
    same = cache.bill(call(block("a", 200, part=Part.SCHEMA), block("s", 1_500), at=60))
    assert same.read_tokens == 1_664


def test_openai_models_before_gpt_5_6_write_for_free_and_forget_after_5_idle_minutes() -> None:
    cache = openai(NO_WRITE_PRICE)
    first = cache.bill(call(block("s", 1_500)))
    assert first.write_tokens == 0
    assert first.usd == pytest.approx(usd(uncached=1_500))
    assert cache.bill(call(block("s", 1_500), at=290)).read_tokens == 1_408
    # Read at 290 s, so it lives until 590 s; then nothing for more than five minutes.
    assert cache.bill(call(block("s", 1_500), at=580)).read_tokens == 1_408
    assert cache.bill(call(block("s", 1_500), at=881)).read_tokens == 0


def test_openai_caches_are_per_model() -> None:
    cache = openai()
    cache.bill(call(block("s", 1_500)))
    assert cache.bill(call(block("s", 1_500), model="other", at=30)).read_tokens == 0


# Anthropic


def test_anthropic_caches_nothing_below_the_model_minimum() -> None:
    cache = anthropic(minimum=512)
    for at in (0, 30):
        bill = cache.bill(
            call(block("s", 500, breakpoint="5m"), block("u", 10), at=at, vendor="anthropic")
        )
        assert (bill.read_tokens, bill.write_tokens) == (0, 0)
        assert bill.usd == pytest.approx(usd(uncached=510))


def test_anthropic_writes_at_a_breakpoint_and_reads_it_after() -> None:
    cache = anthropic()
    blocks = (block("s", 600, breakpoint="5m"), block("u", 100, in_messages=True))
    first = cache.bill(call(*blocks, vendor="anthropic"))
    assert (first.read_tokens, first.write_tokens) == (0, 600)
    assert first.usd == pytest.approx(usd(uncached=100, write=600))
    second = cache.bill(call(*blocks, at=30, vendor="anthropic"))
    assert (second.read_tokens, second.write_tokens) == (600, 0)
    assert second.usd == pytest.approx(usd(uncached=100, read=600))


def test_anthropic_does_not_cache_without_a_breakpoint() -> None:
    cache = anthropic()
    for at in (0, 30):
        bill = cache.bill(call(block("s", 600), at=at, vendor="anthropic"))
        assert (bill.read_tokens, bill.write_tokens) == (0, 0)


def test_anthropic_a_different_output_format_invalidates_the_whole_cache() -> None:
    cache = anthropic()
    cache.bill(
        call(block("a", 50, part=Part.SCHEMA), block("s", 600, breakpoint="5m"), vendor="anthropic")
    )
    other = cache.bill(
        call(
            block("b", 50, part=Part.SCHEMA),
            block("s", 600, breakpoint="5m"),
            at=30,
            vendor="anthropic",
        )
    )
    assert (other.read_tokens, other.write_tokens) == (0, 650)


def test_anthropic_thinking_or_effort_changes_invalidate_the_message_blocks_only() -> None:
    cache = anthropic()
    blocks = (
        block("s", 600, breakpoint="5m"),
        block("m", 200, in_messages=True, breakpoint="5m"),
        block("u", 10, in_messages=True),
    )
    first = cache.bill(call(*blocks, vendor="anthropic", settings="effort low"))
    assert first.write_tokens == 800
    changed = cache.bill(call(*blocks, at=30, vendor="anthropic", settings="effort high"))
    # The system breakpoint still reads; the message one is written again.
    assert (changed.read_tokens, changed.write_tokens) == (600, 200)
    assert changed.usd == pytest.approx(usd(uncached=10, read=600, write=200))


def test_anthropic_a_breakpoint_looks_back_20_blocks_for_an_entry() -> None:
    cache = anthropic()
    cache.bill(call(block("s", 600, breakpoint="5m"), vendor="anthropic"))
    near = [block("s", 600), *(block(chr(97 + i), 5, in_messages=True) for i in range(19))]
    near[-1] = Block(near[-1].text, in_messages=True, breakpoint="5m")
    within = cache.bill(call(*near, at=30, vendor="anthropic"))
    assert within.read_tokens == 600  # the entry is 19 blocks before the breakpoint
    far = [block("s", 600), *(block(chr(65 + i), 5, in_messages=True) for i in range(20))]
    far[-1] = Block(far[-1].text, in_messages=True, breakpoint="5m")
    beyond = cache.bill(call(*far, at=60, vendor="anthropic"))
    assert beyond.read_tokens == 0  # 20 blocks before: out of the lookback
    assert beyond.write_tokens == 700


def test_anthropic_refuses_more_than_four_breakpoints() -> None:
    blocks = [block(chr(97 + i), 200, breakpoint="5m") for i in range(5)]
    with pytest.raises(CacheRuleError, match="4"):
        anthropic().bill(call(*blocks, vendor="anthropic"))


def test_anthropic_entries_live_five_minutes_from_their_last_read() -> None:
    cache = anthropic()
    blocks = (block("s", 600, breakpoint="5m"),)
    cache.bill(call(*blocks, vendor="anthropic"))
    assert cache.bill(call(*blocks, at=200, vendor="anthropic")).read_tokens == 600
    assert cache.bill(call(*blocks, at=450, vendor="anthropic")).read_tokens == 600
    late = cache.bill(call(*blocks, at=751, vendor="anthropic"))
    assert (late.read_tokens, late.write_tokens) == (0, 600)


def test_anthropic_one_hour_writes_cost_twice_the_input_rate() -> None:
    bill = anthropic().bill(
        call(block("s", 600, breakpoint="1h"), block("u", 100), vendor="anthropic")
    )
    assert (bill.write_tokens, bill.write_1h) == (600, 600)
    assert bill.usd == pytest.approx(usd(uncached=100, write_1h=600))


def test_anthropic_minimums_follow_the_documented_table() -> None:
    assert anthropic_min_tokens("claude-opus-5-5") == 512
    assert anthropic_min_tokens("claude-sonnet-4-5-20250929") == 1_024
    assert anthropic_min_tokens("claude-haiku-4-5") == 4_096
    assert anthropic_min_tokens("claude-haiku-5-5") == 4_096  # undocumented: the largest


# The ideal cache


def test_the_ideal_cache_reads_any_earlier_prefix_of_the_model_with_no_minimum_or_surcharge() -> (
    None
):
    cache = IdealCache(lambda _vendor, _model: PRICE)
    first = cache.bill(call(block("a", 50, part=Part.SCHEMA), block("s", 100), block("u", 10)))
    assert first.usd == pytest.approx(usd(uncached=160))
    # Another model reads nothing of it: no cache serves one model from another's work.
    other = cache.bill(
        call(block("a", 50, part=Part.SCHEMA), block("s", 100), block("v", 10), model="x", at=0)
    )
    assert other.read_tokens == 0
    # The same model again, with any minimum or surcharge waived: schema and text read.
    again = cache.bill(call(block("a", 50, part=Part.SCHEMA), block("s", 100), block("w", 10)))
    assert again.read_tokens == 150
    assert again.usd == pytest.approx(usd(uncached=10, read=150))


def test_simulate_gives_each_vendor_its_own_cache_and_the_ideal_bill() -> None:
    calls = [
        call(block("s", 1_500), block("x", 100)),
        call(block("s", 1_500), block("y", 100), at=30),
    ]
    vendor, ideal = simulate(calls, lambda _vendor, _model: PRICE)
    assert [b.read_tokens for b in vendor] == [0, 1_408]
    assert [b.read_tokens for b in ideal] == [0, 1_500]


# Request bodies in each vendor's cache order


def test_an_openai_body_runs_tools_then_the_response_format_then_the_messages() -> None:
    body = {
        "model": "gpt-6.2-sol",
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": "turn"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "X", "schema": {}}},
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "prompt_cache_key": "debate-1",
    }
    parsed = openai_call(body, output_tokens=5)
    assert [b.part for b in parsed.blocks] == [Part.SCHEMA, Part.SCHEMA, Part.TEXT, Part.TEXT]
    assert '"function"' in parsed.blocks[0].text
    assert '"json_schema"' in parsed.blocks[1].text
    assert parsed.blocks[2].text == "<system>\nrules\n"
    with pytest.raises(CacheRuleError, match="explicit"):
        openai_call({**body, "prompt_cache_options": {"mode": "explicit"}}, output_tokens=5)


def test_an_anthropic_body_runs_format_tools_system_messages_with_its_marks() -> None:
    body = {
        "model": "claude-opus-5-5",
        "output_config": {"format": {"type": "json_schema", "schema": {}}, "effort": "high"},
        "thinking": {"type": "adaptive"},
        "tools": [{"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}}],
        "system": [
            {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "so far"}, {"type": "text", "text": "turn"}],
            }
        ],
        "cache_control": {"type": "ephemeral"},
    }
    parsed = anthropic_call(body, output_tokens=5)
    assert [(b.part, b.in_messages, b.breakpoint) for b in parsed.blocks] == [
        (Part.SCHEMA, False, None),
        (Part.SCHEMA, False, "5m"),
        (Part.TEXT, False, "1h"),
        (Part.TEXT, True, None),
        (Part.TEXT, True, "5m"),  # the automatic mark on the last block
    ]
    assert "cache_control" not in parsed.blocks[1].text
    assert parsed.blocks[3].text == "<user>\nso far"
    assert '"high"' in parsed.settings
    assert '"adaptive"' in parsed.settings
    plain = anthropic_call({**body, "system": "rules", "cache_control": None}, output_tokens=5)
    assert plain.blocks[2] == Block("rules")
