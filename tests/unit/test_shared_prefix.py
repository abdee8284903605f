"""Issue 32, item 2: one shared prefix for every role.

Every protocol's debate (every role it has, two rounds where it has them) is recorded, and each
call is built into the request a vendor gets: OpenAI's Chat Completions arguments, Anthropic's
Messages parameters with structured outputs and with a forced tool. Read in the vendor's
documented cache order, everything before the first message after the preamble (the output
schema or tool, the system prompt of rules and case) is byte-identical on every call; each
call's own part (the debate so far, then the role's instructions) comes after it. Also: the
envelope is a schema each vendor accepts and holds every call's answer, Anthropic's cache marks
line up across the turns of a round, and a reply under the wrong key is re-asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from engine.envelope import Envelope
from engine.errors import EngineError
from engine.llm import (
    Completion,
    LLMRequest,
    Message,
    complete_structured,
    output_schema,
)
from engine.models import (
    ContextDocument,
    DebateSpec,
    DebateStatus,
    ModelSettings,
    Participant,
    ProposerTurn,
    Role,
    Usage,
)
from engine.pricing import FREE, Pricing
from engine.protocols import (
    PROTOCOLS,
    adversarial,
    consensus,
    panel,
    stances,
    structured,
    structured_judge,
)
from engine.protocols.base import render_material
from engine.protocols.outputs import Outputs
from engine.providers.anthropic_messages import Shape, build_params
from engine.providers.fake import SchemaFillingLLM
from engine.providers.openai_request import Learned, chat_params
from engine.providers.schemas import (
    StructuredMode,
    output_format_schema,
    strict_schema,
    tool_input_schema,
)
from engine.rounds import Dimensions
from engine.runner import run_debate
from tests.helpers import shipped_prompts
from tests.integration.anthropic_standin import schema_problems, union_count
from tests.integration.openai_standin import strict_problem

FAKE = ModelSettings(provider="fake", model="fake-model")
ROLE = "ROLE: "
SYNTHESIS = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["adopt", "wait"]},
        "reasons": {"type": "array", "items": {"type": "string"}},
    },
}
OUTPUTS = {
    "adversarial": adversarial.OUTPUTS,
    "consensus": consensus.OUTPUTS,
    "panel": panel.OUTPUTS,
    "stances": stances.stances_outputs(json.dumps(SYNTHESIS, sort_keys=True)),
    "structured": structured.OUTPUTS,
}


def spec_for(protocol: str) -> DebateSpec:
    """A debate of `protocol` that asks every output type it has, two rounds where it can."""
    count = 2 if protocol in ("structured", "stances") else 3
    debaters = [
        Participant(
            role=Role.DEBATER,
            name=f"p{index}",
            stance=f"p{index}'s way is right" if protocol == "stances" else None,
            model=FAKE,
        )
        for index in range(count)
    ]
    options: dict[str, Any] = {
        "panel": {"aggregation": "judge", "route_confidence": 1.0, "convergence_threshold": 1.0},
        "stances": {"synthesizer": True, "output_schema": SYNTHESIS},
    }.get(protocol, {})
    extra = [Participant(role=Role.ROUTER, model=FAKE)] if protocol == "panel" else []
    rounds = 1 if protocol == "structured" else 2
    return DebateSpec(
        question="Should we move the nightly batch jobs to Kubernetes CronJobs?",
        protocol=protocol,
        context=[ContextDocument(title="ADR-7", text="Jobs must finish before 06:00 UTC. " * 20)],
        default_model=FAKE,
        participants=[*(debaters if protocol != "adversarial" else []), *extra],
        max_rounds=rounds,
        min_rounds=rounds if protocol == "adversarial" else 1,
        options=options,
    )


async def recorded(protocol: str) -> tuple[DebateSpec, list[LLMRequest], list[str]]:
    """The spec, every request of its debate in order, and each turn's raw reply."""
    spec = spec_for(protocol)
    llm = SchemaFillingLLM(seed=5)
    result = await run_debate(spec, resolve_llm=lambda _m: llm, prompts=shipped_prompts())
    assert result.status is DebateStatus.COMPLETE, result.error
    assert len(llm.calls) == len(result.transcript), "one request per turn: no re-asks"
    return spec, llm.calls, [turn.raw_text for turn in result.transcript]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def openai_order(request: LLMRequest) -> tuple[str, str, Any]:
    """(head, rest, schema sent) of the Chat Completions arguments in OpenAI's cache order: the
    response format ("The structured output schema serves as a prefix to the system message")
    and `prompt_cache_key` (which routes the request), the system message; then the others."""
    kwargs, enveloped = chat_params(
        request,
        StructuredMode.JSON_SCHEMA,
        None,
        Learned(),
        tokens_field="max_completion_tokens",
        prompt_cache=True,
    )
    assert enveloped
    messages = kwargs["messages"]
    head = dumps([kwargs["response_format"], kwargs["prompt_cache_key"]])
    head += dumps([m for m in messages if m["role"] == "system"])
    rest = dumps([m for m in messages if m["role"] != "system"])
    return head, rest, kwargs["response_format"]["json_schema"]["schema"]


def anthropic_order(request: LLMRequest, mode: StructuredMode) -> tuple[str, str, Any]:
    """(head, rest, schema sent) of the Messages parameters in Anthropic's cache order:
    "`tools`, `system`, and `messages` (in that order)", after what invalidates the cache when
    it changes (the output format, thinking, effort)."""
    shape = Shape(mode=mode, thinking=mode is StructuredMode.OUTPUT_FORMAT, effort="low")
    params = build_params(request, shape, prompt_caching=True)
    tools = params.get("tools")
    head = dumps([tools, params.get("tool_choice"), params.get("output_config")])
    head += dumps(params.get("thinking")) + dumps(params["system"])
    rest = dumps(params["messages"])
    if tools:
        return head, rest, tools[0]["input_schema"]
    return head, rest, params["output_config"]["format"]["schema"]


VENDORS: dict[str, Callable[[LLMRequest], tuple[str, str, Any]]] = {
    "openai": openai_order,
    "anthropic-output-format": lambda r: anthropic_order(r, StructuredMode.OUTPUT_FORMAT),
    "anthropic-tool": lambda r: anthropic_order(r, StructuredMode.TOOL),
}


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_every_call_of_a_debate_shares_its_prefix_up_to_the_first_role_specific_byte(
    protocol: str, vendor: str
) -> None:
    spec, calls, _ = await recorded(protocol)
    built = [VENDORS[vendor](call) for call in calls]

    assert {call.envelope.key for call in calls if call.envelope} == {
        key for key in OUTPUTS[protocol].schema["properties"]
    }, "the debate asked every output type of the protocol"
    heads = {head for head, _, _ in built}
    assert len(heads) == 1, "schema, tools and system are the same bytes on every call"
    (head,) = heads
    # The shared part holds the whole preamble (rules, question, documents) and the schema...
    assert dumps(render_material(shipped_prompts(), spec))[1:-1] in head
    assert dumps(built[0][2]) in head
    assert set(built[0][2]["properties"]) == set(OUTPUTS[protocol].schema["properties"])
    # ...and nothing of any one call: its own part (the debate so far, its role's
    # instructions, the key it fills) comes after.
    for call, (_, rest, _) in zip(calls, built, strict=True):
        assert call.envelope is not None
        user = call.messages[1].content
        so_far = user[: user.index(ROLE)]
        assert so_far == (user[: call.shared_breaks[-1]] if call.shared_breaks else "")
        assert ROLE not in head
        assert f'under \\"{call.envelope.key}\\"' in rest


async def test_anthropic_marks_the_preamble_and_the_debate_so_far_for_later_turns() -> None:
    """The last system block and the end of the debate so far carry `cache_control` (two of
    the four marks a request may have); the debate so far is one block per section, so a later
    turn of the round starts with the earlier turn's blocks and its lookback (20 blocks) finds
    what the earlier turn wrote. The round's last turn, which no later turn extends, marks only
    what the turn before it wrote (every role on one model here)."""
    _, calls, _ = await recorded("adversarial")
    shape = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort=None)
    built = [build_params(call, shape, prompt_caching=True) for call in calls]
    rounds: list[list[list[dict[str, Any]]]] = []

    def plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]

    for params in built:
        assert params["system"][-1]["cache_control"] == {"type": "ephemeral"}
        blocks = params["messages"][0]["content"]
        marks = [i for i, block in enumerate(blocks) if "cache_control" in block]
        assert json.dumps(params).count('"cache_control"') == 1 + len(marks) <= 4
        if not marks:
            assert "THE DEBATE SO FAR" not in json.dumps(blocks), "only the framing turn"
            continue
        (mark,) = marks
        assert len(params["system"]) + mark + 1 <= 20
        shared = blocks[: mark + 1]
        if not blocks[mark + 1]["text"].startswith(ROLE):
            # The round's last turn: no later turn extends its debate so far, so it marks the
            # end of what the turn before wrote, and reads it without writing more.
            assert rounds, "a turn before it wrote"
            assert plain(shared) == plain(rounds[-1][-1]), "the mark ends the earlier turn's"
        # A turn of the same round starts with the blocks of the turn before; a new round's
        # first turn does not (the earlier round became a record).
        if rounds and plain(shared)[: len(rounds[-1][-1])] == plain(rounds[-1][-1]):
            rounds[-1].append(shared)
        else:
            rounds.append([shared])
    assert len(rounds) == 2, "two rounds"
    for turns in rounds:
        assert len(turns) >= 4, "proposer, critic (once or twice), rebuttal, moderator"


async def test_anthropic_marks_the_whole_debate_as_the_structured_judges_shared_prefix() -> None:
    """The structured judge answers in three calls (the PRO side, the CON side, the ruling), all
    on one model: each is shown the whole debate before its own instructions, in the same
    blocks, with `cache_control` on the last, so the second and third read what the first
    wrote; nothing side-specific comes before the mark."""
    _, calls, _ = await recorded("structured")
    judge = [c for c in calls if c.envelope and c.envelope.key in ("side_judgment", "ruling")]
    assert [call.envelope.key for call in judge if call.envelope] == [
        "side_judgment",
        "side_judgment",
        "ruling",
    ]
    shape = Shape(mode=StructuredMode.OUTPUT_FORMAT, thinking=True, effort="high")
    shared: list[list[str]] = []
    for call in judge:
        params = build_params(call, shape, prompt_caching=True)
        blocks = params["messages"][0]["content"]
        marks = [i for i, block in enumerate(blocks) if "cache_control" in block]
        assert len(marks) == 1
        (mark,) = marks
        assert blocks[mark + 1]["text"].startswith(ROLE), "the mark ends the debate so far"
        assert len(params["system"]) + mark + 1 <= 20, "within the lookback of 20 blocks"
        before = [block["text"] for block in blocks[: mark + 1]]
        shared.append(before)
        text = "".join(before)
        for heading in ("PRO ARGUMENTS:", "CON ARGUMENTS:", "CROSS-EXAMINATION:", "CLOSINGS:"):
            assert heading in text
        for own in ("Now judge the", "Your scores"):
            assert own not in text, "nothing of one call before the mark"
    assert shared[0] == shared[1] == shared[2], "the same blocks up to the mark on every call"


def envelope_of(outputs: Outputs) -> Envelope:
    """The envelope of a call filling the first key of `outputs`."""
    return Envelope(
        name=f"{outputs.protocol}_reply",
        json_schema=outputs.schema,
        key=next(iter(outputs.schema["properties"])),
        size_bytes=outputs.size_bytes,
    )


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_each_protocols_envelope_is_a_schema_both_vendors_accept(protocol: str) -> None:
    envelope = envelope_of(OUTPUTS[protocol])
    openai_schema = strict_schema(envelope.json_schema)
    assert strict_problem(openai_schema) is None
    assert set(openai_schema["required"]) == set(openai_schema["properties"])
    for schema in (
        envelope.with_optional_keys(output_format_schema(envelope.json_schema)),
        envelope.with_optional_keys(tool_input_schema(envelope.json_schema)),
    ):
        assert schema["required"] == []
        assert "anyOf" not in json.dumps(schema["properties"]), "optional, not nullable, keys"
    anthropic = envelope.with_optional_keys(output_format_schema(envelope.json_schema))
    assert schema_problems(anthropic) == []
    # Anthropic refuses more than 16 union-typed parameters in a structured-outputs schema.
    assert union_count(anthropic) <= 16


def pad(value: Any, schema: Any, defs: dict[str, Any]) -> Any:
    """`value` with null for each required member it lacks that `schema` lets be null: what a
    model constrained by the envelope's superset sends for ids its debate does not have."""
    schema = resolve(schema, defs)
    if isinstance(value, dict):
        objects = [
            o for o in [schema, *schema.get("anyOf", [])] if "properties" in resolve(o, defs)
        ]
        # Of a union of objects, the one whose members the value has (one side's argument ids).
        option = next(
            (o for o in objects if set(value) <= set(resolve(o, defs)["properties"])),
            objects[0] if objects else None,
        )
        if option is None:
            return value
        properties = resolve(option, defs)["properties"]
        padded = {k: pad(v, properties.get(k, {}), defs) for k, v in value.items()}
        for name in resolve(option, defs).get("required", []):
            if name not in padded and admits(None, properties[name], defs):
                padded[name] = None
        return padded
    if isinstance(value, list):
        options = [resolve(o, defs) for o in [schema, *schema.get("anyOf", [])]]
        items: Any = next((o["items"] for o in options if "items" in o), {})
        return [pad(item, items, defs) for item in value]
    return value


def resolve(schema: Any, defs: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def admits(value: Any, schema: Any, defs: dict[str, Any]) -> bool:
    """Whether `value` is an instance of `schema` (the JSON Schema keywords the engine emits)."""
    schema = resolve(schema, defs)
    if "anyOf" in schema:
        return any(admits(value, option, defs) for option in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return ok and schema.get("minimum", value) <= value <= schema.get("maximum", value)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return (
            isinstance(value, str)
            and schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
            and ("pattern" not in schema or re.search(schema["pattern"], value) is not None)
        )
    if kind == "array":
        return (
            isinstance(value, list)
            and schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value))
            and all(admits(item, schema.get("items", {}), defs) for item in value)
        )
    if kind == "object":
        properties = schema.get("properties", {})
        return (
            isinstance(value, dict)
            and all(name in value for name in schema.get("required", []))
            and (schema.get("additionalProperties") is not False or set(value) <= set(properties))
            and all(admits(v, properties.get(k, {}), defs) for k, v in value.items())
        )
    return True


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_the_envelope_holds_the_answer_of_every_call_of_a_debate(protocol: str) -> None:
    """The envelope is static, its per-debate parts replaced by supersets: every answer of a
    debate (valid for its call's own type), under its key with the other keys null, is an
    instance of the envelope schema, as a strict decoder needs it to be."""
    _, calls, replies = await recorded(protocol)
    for call, reply in zip(calls, replies, strict=True):
        assert call.envelope is not None
        schema = call.envelope.json_schema
        defs = schema.get("$defs", {})
        answer = {key: None for key in call.envelope.keys}
        answer[call.envelope.key] = json.loads(reply)
        assert admits(pad(answer, schema, defs), schema, defs), (call.envelope.key, reply)


class Enveloped:
    """A vendor-like model that answers each call with the next of `replies`, as a reply to
    the request's envelope."""

    provider = "stub"

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []

    def price_of(self, model: str) -> Pricing:
        return FREE

    async def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        return Completion(
            text=json.dumps(self.replies.pop(0)),
            usage=Usage(input_tokens=10, output_tokens=10),
            provider=self.provider,
            model=request.model,
            enveloped=True,
        )


def proposer_request() -> LLMRequest:
    return LLMRequest(
        model="m",
        messages=[
            Message(role="system", content="rules and case"),
            Message(role="user", content="ROLE: proposer."),
        ],
        envelope=adversarial.OUTPUTS.envelope(ProposerTurn),
    )


PROPOSAL = {"thesis": "Adopt it.", "supporting_arguments": ["It is simpler."], "evidence_cited": []}
NULLS = dict.fromkeys(adversarial.OUTPUTS.schema["properties"])


async def test_a_reply_under_its_own_key_validates_as_the_calls_own_type() -> None:
    llm = Enveloped({**NULLS, "proposer_turn": PROPOSAL})
    result = await complete_structured(llm, proposer_request(), ProposerTurn)
    assert result.value == ProposerTurn.model_validate(PROPOSAL)
    assert result.reasks == 0


@pytest.mark.parametrize(
    ("reply", "filled"),
    [
        ({**NULLS, "critic_turn": PROPOSAL}, '"critic_turn"'),
        (
            {**NULLS, "proposer_turn": PROPOSAL, "rebuttal_turn": PROPOSAL},
            '"proposer_turn", "rebuttal_turn"',
        ),
        (NULLS, "nothing"),
    ],
)
async def test_a_reply_under_another_key_or_several_is_reasked_like_any_invalid_reply(
    reply: dict[str, Any], filled: str
) -> None:
    llm = Enveloped(reply, {**NULLS, "proposer_turn": PROPOSAL})
    result = await complete_structured(llm, proposer_request(), ProposerTurn)
    assert result.reasks == 1
    assert result.value.thesis == "Adopt it."
    reask = llm.requests[1].messages[-1].content
    wanted = 'put your answer under "proposer_turn" and nothing under any other key'
    assert f"{wanted}; the reply filled {filled}" in reask


async def test_null_padding_for_ids_a_debate_lacks_is_dropped_before_the_exact_type_validates() -> (
    None
):
    """The structured judge's envelope has keys for all five argument ids of a side; a debate
    with three arguments a side validates the judge's answer with exactly that side's three."""
    ids = ["PRO-1", "PRO-2", "PRO-3"]
    scores = {"logic": 7, "evidence": 6, "responsiveness": 5, "honesty": 8}
    absent = {"PRO-4": None, "PRO-5": None}
    judgment = {
        "scores": {**{i: dict(scores) for i in ids}, **absent},
        "trace": {**{i: {"status": "UPHELD", "note": "held"} for i in ids}, **absent},
    }
    own = structured_judge.side_judgment_type(ids)
    request = proposer_request().model_copy(update={"envelope": structured.OUTPUTS.envelope(own)})
    nulls = dict.fromkeys(structured.OUTPUTS.schema["properties"])
    result = await complete_structured(
        Enveloped({**nulls, "side_judgment": judgment}), request, own
    )
    assert result.reasks == 0
    assert structured_judge.keyed_rows(result.value.scores, Dimensions).keys() == set(ids)


def test_a_call_whose_type_the_protocol_did_not_declare_fails_naming_the_declaration() -> None:
    class Verdict(BaseModel):
        text: str

    with pytest.raises(EngineError, match="Verdict is not declared in the adversarial protocol"):
        adversarial.OUTPUTS.envelope(Verdict)


def test_without_a_vendor_prefix_cache_or_a_schema_mode_the_role_sends_its_own_schema() -> None:
    """OpenAI-compatible servers (`prompt_cache=False`: their caches match prompt tokens, which
    a response format is not part of), Anthropic without prompt caching, and the JSON-mode
    fallbacks send the role's own schema, or none, and read the reply as the role's object."""
    request = proposer_request().model_copy(
        update={"output_schema": output_schema(ProposerTurn), "schema_name": "ProposerTurn"}
    )
    compatible, enveloped = chat_params(
        request,
        StructuredMode.JSON_SCHEMA,
        None,
        Learned(),
        tokens_field="max_tokens",
        prompt_cache=False,
    )
    assert not enveloped
    assert compatible["response_format"]["json_schema"]["name"] == "ProposerTurn"
    assert "prompt_cache_key" not in compatible
    assert compatible["messages"][-1]["content"] == "ROLE: proposer."
    for mode in (StructuredMode.JSON_OBJECT, StructuredMode.PROMPT):
        fallback, enveloped = chat_params(
            request, mode, None, Learned(), tokens_field="max_tokens", prompt_cache=True
        )
        assert not enveloped
        assert "proposer_turn" not in json.dumps(fallback)
        assert fallback["prompt_cache_key"].startswith("debatebot-")
    for mode in (StructuredMode.OUTPUT_FORMAT, StructuredMode.TOOL):
        shape = Shape(mode=mode, thinking=False, effort=None)
        plain = build_params(request, shape, prompt_caching=False)
        assert "proposer_turn" not in json.dumps(plain)
        assert "Proposition" not in json.dumps(plain)
