"""Refusals as people read them: pydantic's errors become sentences naming the flag that was
used, a protocol's round cap and options are said plainly, a retired model's advice names the
flag or setting that chose it, and the one spec check (`checked_spec`) that the intake and the
CLI share refuses all of it before anything is stored. A worker ends a debate that cannot run
instead of running it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import create_engine

from bot.cli import main
from bot.cli.run import embedded_model_note
from bot.intake.checked import ASKED_AS, checked_spec
from bot.intake.errors import NotAdmittedError
from bot.intake.intake import Intake
from bot.intake.policy import SpecPolicy
from bot.intake.request import DebateRequest, FollowUp, Origin, OriginKind
from bot.jobs.unrunnable import MAX_FRUITLESS_CLAIMS, why_not_run
from bot.providers import ProviderRegistry
from bot.settings import RoleModel, Settings, SettingsError
from bot.store.debate_tables import Debate, DebateSource
from bot.store.tenancy import PENDING_WORKSPACE
from engine.errors import SchemaTooLargeError, SpecError
from engine.llm import LLMRequest, Message, output_schema
from engine.models import DebateSpec, DebateStatus, ModelSettings, ModeratorTurn
from engine.protocols import checked_protocol
from engine.providers.local import LlamaConfig, LlamaSession
from engine.readable import readable
from engine.runner import ended_unrun

FAKE = ModelSettings(provider="fake", model="fake-model")


def spec_error(**fields: Any) -> ValidationError:
    with pytest.raises(ValidationError) as raised:
        DebateSpec(**{"question": "Adopt it?", **fields})
    return raised.value


def test_pydantic_errors_read_as_sentences_naming_the_flag() -> None:
    assert readable(spec_error(max_rounds=0), ASKED_AS) == "--rounds must be at least 1; got 0"
    assert readable(spec_error(budget_usd=-1.0), ASKED_AS) == (
        "--budget must be more than 0; got -1"
    )
    # A validator's own sentence, without pydantic's "Value error, " in front.
    assert readable(spec_error(question="  "), ASKED_AS) == (
        "the question is empty: say what the debate should decide"
    )
    said = readable(spec_error(max_rounds="many", judges=9), ASKED_AS)
    assert said == "--rounds must be a whole number; got 'many'; --judges must be at most 5; got 9"
    for error in (spec_error(max_rounds=0), spec_error(question=""), spec_error(judges=-1)):
        text = readable(error, ASKED_AS)
        assert "Input should" not in text
        assert "Value error" not in text


def test_a_protocols_round_cap_is_said_plainly() -> None:
    structured = DebateSpec(question="Adopt it?", protocol="structured", max_rounds=2)
    with pytest.raises(SpecError) as raised:
        checked_protocol(structured)
    assert str(raised.value) == (
        "the structured protocol runs exactly one round; 2 were asked for. Leave out --rounds"
        " (or give --rounds 1)"
    )
    with pytest.raises(
        SpecError, match=r"at most 3 rounds; 4 were asked for\. Use --rounds 1 to 3"
    ):
        checked_protocol(DebateSpec(question="Adopt it?", max_rounds=4))


def policy(**settings: Any) -> SpecPolicy:
    chosen = Settings(**{"provider": "fake", **settings})
    return SpecPolicy(chosen, ProviderRegistry(chosen))


@pytest.mark.parametrize(
    ("protocol", "options", "said"),
    [
        (
            "consensus",
            {"nokey": 1},
            "the consensus protocol has no option nokey; its options are votes, threshold,"
            " decisions",
        ),
        (
            "panel",
            {"aggregation": "weighted", "simlarity": 0.3},
            "the panel protocol has no option simlarity; its options are aggregation,"
            " similarity, convergence_threshold, escalate_below, route_confidence",
        ),
        (
            "adversarial",
            {"seed": 7},
            "the adversarial protocol takes no options; seed given. Options belong to the"
            " consensus, panel, stances protocols",
        ),
        (
            "structured",
            {"x": 1},
            "the structured protocol takes no options; x given. Options belong to the"
            " consensus, panel, stances protocols",
        ),
        (
            "panel",
            {"aggregation": "bogus"},
            "the panel option aggregation must be one of 'majority', 'weighted' or 'judge';"
            " got 'bogus'",
        ),
    ],
)
def test_options_no_protocol_knows_are_refused_naming_its_options(
    protocol: str, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(NotAdmittedError) as raised:
        checked_spec(lambda: policy().spec("Adopt it?", protocol=protocol, options=options))
    assert str(raised.value) == f"cannot start this debate: {said}"


async def test_slack_follow_ups_carrying_unknown_options_get_the_same_refusal() -> None:
    """Slack's triggers pass no options of their own; a follow-up (*Another round*, *Debate
    anyway*) runs on its original's spec, and the intake checks it as the CLI does."""
    spec = DebateSpec(question="Adopt it?", protocol="consensus", options={"nokey": 1})
    intake = Intake(engine=create_engine("sqlite://"), policy=policy(), workspace=PENDING_WORKSPACE)
    request = DebateRequest(
        trigger_key="another:1",
        source=DebateSource.ANOTHER_ROUND,
        asked=FollowUp(original_id=1, spec=spec, continues=False, rounds=1),
        origin=Origin(OriginKind.TERMINAL),
    )
    with pytest.raises(NotAdmittedError) as raised:
        await intake.admit(request)
    assert str(raised.value) == (
        "cannot start this debate: the consensus protocol has no option nokey; its options are"
        " votes, threshold, decisions"
    )


def test_a_retired_model_is_refused_naming_the_flag_or_setting_that_chose_it() -> None:
    retired = "anthropic:claude-sonnet-4"

    def refusal(chosen: SpecPolicy, **asked: Any) -> str:
        with pytest.raises(SettingsError) as raised:
            chosen.spec("Adopt it?", **asked)
        return str(raised.value)

    by_flag = refusal(policy(), overrides={"moderator": RoleModel.parse(retired)})
    assert "use claude-sonnet-5-5 instead: `--moderator anthropic:claude-sonnet-5-5`" in by_flag
    assert "--model" not in by_flag
    by_model = refusal(policy(), provider="anthropic", model="claude-sonnet-4")
    assert "use claude-sonnet-5-5 instead: `--model claude-sonnet-5-5`" in by_model
    by_setting = refusal(
        policy(roles={"moderator": {"provider": "anthropic", "model": "claude-sonnet-4"}})
    )
    assert "DEBATEBOT_ROLES__MODERATOR__MODEL=claude-sonnet-5-5" in by_setting
    assert "--model" not in by_setting
    by_deployment = refusal(policy(provider="anthropic", model="claude-sonnet-4"))
    assert "use claude-sonnet-5-5 instead: DEBATEBOT_MODEL=claude-sonnet-5-5" in by_deployment


def claimed(spec: DebateSpec, claims: int) -> Debate:
    return Debate(
        id=7,
        trigger_key="k",
        source=DebateSource.COMMAND,
        question=spec.question,
        protocol=spec.protocol,
        spec_json=spec.model_dump_json(),
        claims=claims,
    )


def test_a_worker_ends_a_debate_that_cannot_run_or_keeps_being_claimed() -> None:
    good = DebateSpec(question="Adopt it?", default_model=FAKE)
    assert why_not_run(claimed(good, 1), good, stored_turns=0) is None
    # Claims that stored turns made progress: a long debate resumed often is not ended.
    assert why_not_run(claimed(good, 30), good, stored_turns=25) is None
    assert why_not_run(claimed(good, MAX_FRUITLESS_CLAIMS), good, stored_turns=0) is None
    gave_up = why_not_run(claimed(good, MAX_FRUITLESS_CLAIMS + 1), good, stored_turns=0)
    assert gave_up is not None
    assert "claimed this debate 6 times and it stored 0 turns" in gave_up
    bad = good.model_copy(update={"max_rounds": 4})
    cannot = why_not_run(claimed(bad, 1), bad, stored_turns=0)
    assert cannot == (
        "its spec cannot run: the adversarial protocol runs at most 3 rounds; 4 were asked for."
        " Use --rounds 1 to 3"
    )
    result = ended_unrun(bad, cannot)
    assert result.verdict.status is DebateStatus.FAILED
    assert result.error == cannot
    assert result.verdict.escalate
    assert f"the debate failed: {cannot}" in result.verdict.escalation_reasons


class CountingLlama:
    """Stands in for llama_cpp.Llama's tokenizer: one token per four bytes."""

    def tokenize(self, text: bytes, add_bos: bool = True) -> list[int]:
        return list(range(len(text) // 4))


def test_a_question_too_long_for_the_local_model_says_so_without_blaming_documents() -> None:
    schema = output_schema(ModeratorTurn)
    request = LLMRequest(
        messages=[
            Message(role="system", content=f"Question: {'why ' * 2_000}\n(no documents)"),
            Message(role="user", content="Moderate."),
        ],
        model="smollm2-135m-instruct",
        max_tokens=1024,
        output_schema=schema,
    )
    with pytest.raises(SchemaTooLargeError) as raised:
        LlamaSession(LlamaConfig(n_ctx=2048)).grammar_for(CountingLlama(), request, schema)
    said = str(raised.value)
    assert "the question and its documents (if any) are too long for the local model" in said
    assert "shorten the context documents" not in said
    assert "DEBATEBOT_LOCAL_N_CTX" in said


def test_the_embedded_model_is_named_when_it_answers() -> None:
    local = SpecPolicy(Settings(), ProviderRegistry(Settings())).spec("Adopt it?")
    note = embedded_model_note(Settings(), local)
    assert note is not None
    assert "the embedded model is SmolLM2-135M, a 135M-parameter model" in note
    assert "the text is not meaningful" in note
    # A key alone does not choose a hosted provider: the note names the provider setting too.
    assert "DEBATEBOT_PROVIDER=anthropic with DEBATEBOT_ANTHROPIC_API_KEY" in note
    assert embedded_model_note(Settings(), policy().spec("Adopt it?")) is None, "fake: no note"
    own_file = Settings(local_model_path=Path("/models/other.gguf"))
    assert embedded_model_note(own_file, local) is None, "another GGUF is not SmolLM2"


def test_a_bad_setting_is_refused_in_a_sentence_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DEBATEBOT_JUDGES", "9")
    assert main(["models"]) == 1
    assert capsys.readouterr().err == (
        "debatebot: invalid setting: DEBATEBOT_JUDGES must be at most 5; got '9'\n"
    )


@pytest.mark.parametrize("command", [["mcp"], ["web"], ["worker"]])
def test_an_agents_review_channel_without_slack_is_refused_at_start_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setenv("DEBATEBOT_MCP_REVIEW_CHANNEL", "C0REVIEW1")
    monkeypatch.delenv("DEBATEBOT_SLACK_BOT_TOKEN", raising=False)
    assert main(command) == 1
    assert capsys.readouterr().err == (
        "debatebot: invalid setting: DEBATEBOT_MCP_REVIEW_CHANNEL is set but this deployment"
        " has no Slack bot token (DEBATEBOT_SLACK_BOT_TOKEN) to post review requests with: set"
        " the bot token of the workspace that channel is in, or unset"
        " DEBATEBOT_MCP_REVIEW_CHANNEL (agents are still told when people must decide)\n"
    )
    monkeypatch.setenv("DEBATEBOT_SLACK_BOT_TOKEN", "xoxb-1234567890-abcdefghijkl")
    assert Settings().mcp_review_channel == "C0REVIEW1"
