"""The result document a verdict row keeps reports the debate's cost, tokens and turns when read
back without its transcript, including documents written before it kept them."""

from __future__ import annotations

import asyncio
import json

from bot.store.results import StoredResult
from engine.models import DebateResult, DebateSpec, ModelSettings
from engine.pricing import Pricing
from engine.providers.fake import SchemaFillingLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")


def priced_result() -> DebateResult:
    llm = SchemaFillingLLM(pricing=Pricing(input_per_mtok=3.0, output_per_mtok=15.0))
    spec = DebateSpec(question="Adopt ADR-042?", default_model=FAKE)
    return asyncio.run(run_debate(spec, resolve_llm=lambda _m: llm, prompts=shipped_prompts()))


def test_a_stored_result_read_back_keeps_its_cost_tokens_and_turns() -> None:
    result = priced_result()
    assert result.cost_usd > 0

    stored = StoredResult.read(StoredResult.document(result))

    assert stored.transcript == []
    assert stored.cost_usd == result.cost_usd
    assert stored.usage == result.usage
    assert stored.cost_by_role == result.cost_by_role
    assert stored.turns == len(result.transcript)
    assert stored.verdict == result.verdict


def test_a_document_written_before_the_totals_were_kept_reads_its_dumped_totals() -> None:
    result = priced_result()
    old = result.model_dump_json(exclude={"transcript"})  # how verdict rows were written
    assert json.loads(old)["cost_usd"] == result.cost_usd

    stored = StoredResult.read(old)

    assert stored.cost_usd == result.cost_usd
    assert stored.usage == result.usage
