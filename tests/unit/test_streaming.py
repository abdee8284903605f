"""Streamed turns in the engine: the fake model's set rate, the readable part of a partial reply,
and the ledger's `TurnStreaming` events (a re-asked reply, a refused stream, the budget)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import StreamRefusedError
from engine.events import DebateEvent, TurnFinished, TurnStarted, TurnStreaming
from engine.llm import LLMRequest, Message, StreamingLLM, output_schema
from engine.models import CriticTurn, DebateStatus, Role
from engine.providers import fake as fake_types
from engine.providers.fake import FunctionLLM, ScriptedLLM, StreamRate
from engine.streaming import readable_so_far
from tests.helpers import DebateScript, reply_for
from tests.unit.test_adversarial import debate, make_spec

REQUEST = LLMRequest(messages=[Message(role="user", content="go")], model="fake-model")


class Clock:
    """A clock the fake's pacing reads and sleeps on, so its schedule is checked exactly."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 9))
        self.now += seconds


async def test_a_fake_with_a_rate_streams_its_reply_token_by_token_on_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr("engine.providers.fake.time.monotonic", clock.monotonic)
    monkeypatch.setattr("engine.providers.fake.asyncio.sleep", clock.sleep)
    llm = ScriptedLLM(["abcdefghij"], stream_rate=StreamRate(tokens_per_s=20, first_token_s=1.5))
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    assert llm.streams(REQUEST)
    completion = await llm.stream(REQUEST, on_text)

    assert seen == ["abcd", "abcdefgh", "abcdefghij"]
    assert clock.sleeps == [1.5, 0.05, 0.05]
    assert completion.text == "abcdefghij"
    assert completion.latency_s == pytest.approx(1.6)


async def test_a_fake_with_a_rate_takes_as_long_answering_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr("engine.providers.fake.asyncio.sleep", clock.sleep)
    llm = ScriptedLLM(["x" * 41], stream_rate=StreamRate(tokens_per_s=40, first_token_s=1.5))
    completion = await llm.complete(REQUEST)
    assert clock.sleeps == [1.75]  # 1.5 s to the first of 11 tokens, 10 more at 40 a second
    assert completion.text == "x" * 41


async def test_a_fake_without_a_rate_does_not_stream() -> None:
    llm = ScriptedLLM(["{}"])
    assert not llm.streams(REQUEST)
    with pytest.raises(StreamRefusedError):
        await llm.stream(REQUEST, lambda _text: _never())


async def _never() -> None:
    raise AssertionError("no text is streamed")


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="tokens_per_s > 0"):
        StreamRate(tokens_per_s=0)


CRITIC = output_schema(CriticTurn)


def test_the_readable_part_is_the_prose_of_the_partial_json() -> None:
    cut = '```json\n{"thesis": "It fails\\nbadly", "counter_arguments": ["one", "tw'
    assert readable_so_far(cut, CRITIC) == "It fails\nbadly\none\ntw"


def test_an_escape_cut_in_half_is_left_out_until_it_is_whole() -> None:
    assert readable_so_far('{"thesis": "caf\\u00', CRITIC) == "caf"
    assert readable_so_far('{"thesis": "caf\\u00e9', CRITIC) == "caf\u00e9"
    assert readable_so_far('{"thesis": "say \\', CRITIC) == "say "
    assert readable_so_far('{"thesis": "a \\ud83d', CRITIC) == "a "


def test_numbers_choices_and_keys_are_not_prose() -> None:
    assert readable_so_far('{"challenge_strength": 7, "evidence_cited": [', CRITIC) == ""
    assert readable_so_far('{"thes', CRITIC) == ""
    assert readable_so_far("I think", CRITIC) == ""


def test_a_reply_to_the_envelope_is_read_under_its_key() -> None:
    raw = '{"proposer_turn": null, "critic_turn": {"thesis": "No fallback'
    assert readable_so_far(raw, CRITIC, envelope_key="critic_turn") == "No fallback"


def streaming(script: DebateScript, rate: float = 10_000) -> FunctionLLM:
    return FunctionLLM(script, stream_rate=StreamRate(tokens_per_s=rate))


def collector() -> tuple[list[DebateEvent], Any]:
    events: list[DebateEvent] = []

    async def sink(event: DebateEvent) -> None:
        events.append(event)

    return events, sink


async def test_each_turn_streams_its_readable_text_before_it_finishes() -> None:
    events, sink = collector()
    result = await debate(make_spec(), streaming(DebateScript()), sink=sink)

    assert result.status is DebateStatus.COMPLETE
    critic = [e for e in events if getattr(e, "role", None) is Role.CRITIC]
    kinds = [type(e) for e in critic]
    assert kinds[0] is TurnStarted
    assert kinds[-1] is TurnStreaming
    texts = [e.text for e in critic if isinstance(e, TurnStreaming)]
    final = reply_for("critic")
    assert texts[-1] == "\n".join([final["thesis"], *final["counter_arguments"]])
    assert all(texts[-1].startswith(text) or "\n" in text for text in texts)
    assert all("{" not in text and '"' not in text for text in texts)
    finished = [e for e in events if isinstance(e, TurnFinished) and e.turn.role is Role.CRITIC]
    assert events.index(finished[0]) > events.index(critic[-1])


async def test_a_streamed_reply_that_fails_validation_is_said_to_be_reasked() -> None:
    bad = reply_for("critic", challenge_strength=99)
    events, sink = collector()
    result = await debate(
        make_spec(), streaming(DebateScript(critic=[bad, reply_for("critic")])), sink=sink
    )

    streamed = [e for e in events if isinstance(e, TurnStreaming) and e.role is Role.CRITIC]
    reasked = [e for e in streamed if e.reasked]
    assert len(reasked) == 1
    assert reasked[0].text == ""
    assert streamed.index(reasked[0]) not in (0, len(streamed) - 1)  # shown, re-asked, shown
    critic = next(t for t in result.transcript if t.role is Role.CRITIC)
    assert critic.reasks == 1
    assert critic.parsed["challenge_strength"] == 7


async def test_a_refused_stream_is_asked_whole() -> None:
    script = DebateScript(
        critic=[StreamRefusedError("the server will not stream"), reply_for("critic")]
    )
    events, sink = collector()
    llm = streaming(script)
    result = await debate(make_spec(), llm, sink=sink)

    assert result.status is DebateStatus.COMPLETE
    critic = [e for e in events if isinstance(e, TurnStreaming) and e.role is Role.CRITIC]
    assert critic == []
    assert next(t for t in result.transcript if t.role is Role.CRITIC).reasks == 0


async def test_a_model_that_does_not_stream_emits_no_streaming_events() -> None:
    events, sink = collector()
    await debate(make_spec(), DebateScript().llm(), sink=sink)
    assert not [e for e in events if isinstance(e, TurnStreaming)]


async def test_the_budget_bound_covers_a_streamed_call() -> None:
    from engine.pricing import Pricing

    llm = FunctionLLM(
        DebateScript(),
        stream_rate=StreamRate(tokens_per_s=10_000),
        pricing=Pricing(input_per_mtok=1.0, output_per_mtok=1.0),
    )
    result = await debate(make_spec(budget_usd=0.001), llm)
    assert result.status is DebateStatus.TRUNCATED_BUDGET
    assert result.cost_usd <= 0.001


@pytest.mark.parametrize("streams", [True, False])
def test_the_fake_provider_takes_its_pace_and_streaming_from_the_settings(streams: bool) -> None:
    from bot.providers import ProviderRegistry
    from bot.settings import Settings
    from engine.models import ModelSettings

    settings = Settings.model_validate(
        {
            "provider": "fake",
            "fake_pace": {"tokens_per_s": 40, "first_token_s": 1.5, "streams": streams},
        }
    )
    llm = ProviderRegistry(settings).resolve(ModelSettings(provider="fake", model="fake-model"))
    assert isinstance(llm, StreamingLLM)
    assert llm.streams(REQUEST) is streams
    assert isinstance(llm, fake_types.SchemaFillingLLM)
    assert llm.stream_rate == StreamRate(tokens_per_s=40, first_token_s=1.5, streams=streams)
