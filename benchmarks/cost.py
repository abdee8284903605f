"""What a debate costs on the vendor's bill, against a single review and an ideal prefix cache.

The bill follows each vendor's documented prompt-cache rules; the ideal cache's bill beside it
shows the gap (issue 32). In one run, with no network.

Each scenario runs through the real adapters (`OpenAIChatLLM`, `AnthropicLLM`) and their SDKs
against the loopback stand-ins that enforce the vendors' request rules
(tests/integration/openai_standin.py, anthropic_standin.py); every request body the adapter
hands its SDK is recorded, and the answered ones are replayed through the cache simulations of
`benchmarks/vendor_cache.py` (its docstring lists the rules, the token estimate and the ideal
cache) at the catalogue's prices. So the figures follow whatever request shapes the code builds.

- Scenarios: a single review (`engine.single`) on the debaters' model and on the moderator's
  model (the baselines); each protocol at 1, 2 and 3 rounds (structured has one), with the
  rounds forced (adversarial `min_rounds`; the replies keep consensus and panel from agreeing);
  on a short case (adr-001) and a long one (adr-001 and further example documents, about
  4,300 tokens of documents).
- Configurations: the default Anthropic and OpenAI models, and one model on every role.
- Replies: the same for every scenario, made from the output schema the engine asked for and
  the call's position in the debate: free text at 40 % of its length limit (at least 240
  characters; shorter to keep a word limit the role's prompt states), three items a list,
  numbers at 70 % of their range, enums in turn. Thinking and reasoning tokens are not
  counted: they cannot be known offline, and every call of a model that always thinks adds
  them at the output rate.
- Time: each call takes `--call-seconds` (30); calls in flight together start at once. A cache
  entry expires by its TTL from that clock.

Goals, printed beside each figure: one round of the adversarial debate ≤ 2× a single review on
the moderator's model and ≤ 5× one on the debaters' model; the vendor bill ≤ 1.3× the ideal
cache's on the long case; three rounds ≤ 2.2× one round. Beside the first two, what no cache
lowers: the debate's output alone, and the moderator's calls alone when its model is another.

Beside each scenario (`benchmarks/cost_checks.py`): `c÷n`, the vendor bill ÷ the same calls
billed with no cache (goal ≤ 1: no cache entry paid for in vain), and `b÷a`, the budget's input
bound before each call ÷ the input tokens the stand-in reported for it (bytes / 4: simulated
usage, no vendor key), for each model's first call in the debate and for the calls after it
(goal ≤ 1.5).

Judging: every debate runs with the shipped number of independent judges (`DEBATEBOT_JUDGES`,
1), which the goals are checked with, and again with none (`--judges 0`); after each case's
table, what the judging adds to each debate: its calls, tokens and dollars, and the dollars as a
share of the same debate without it. (With one key, as here, the judge runs on the deciding
model: the moderator's, or the judge's, or for consensus and panel the debaters'.)

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.cost [--json] [--call-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import SecretStr

from benchmarks.cost_checks import (
    BOUND,
    GOAL_BOUND,
    GOAL_CACHE,
    BoundRatio,
    bound_ratios,
    bounds_watched,
    summary,
    uncached_usd,
)
from benchmarks.tokens import load_cases
from benchmarks.vendor_cache import (
    OPENAI_MIN_TOKENS,
    Bill,
    Call,
    anthropic_call,
    anthropic_min_documented,
    anthropic_min_tokens,
    charge,
    estimate_tokens,
    openai_call,
    simulate,
)
from bot.settings import Settings
from bot.wiring import DebateServices, build_services
from engine.catalog import Catalog
from engine.events import DebateEvent, RoundFinished
from engine.llm import LLM, Completion, LLMRequest
from engine.models import ContextDocument, DebateStatus, ModelSettings, Role
from engine.pricing import Pricing
from engine.protocols import definition_for
from engine.providers.anthropic_messages import AnthropicLLM
from engine.providers.fake import text_for_pattern
from engine.runner import run_debate
from engine.single import single_review
from tests.integration.anthropic_standin import AnthropicStandIn
from tests.integration.openai_standin import OpenAIStandIn

SHORT_CASE = "adr-001"
LONG_DOCUMENT_TOKENS = 4_300
PROTOCOLS = ("adversarial", "stances", "consensus", "panel", "structured")
ROUNDS = (1, 2, 3)
STANCES = {"stances_for": ["adopt it as written"], "stances_against": ["reject it"]}
BUDGET_USD = 1_000.0
"""High enough that no scenario is cut short: the benchmark measures, the ceiling is tested."""
KEYS = {"openai": "sk-cost-benchmark-0123456789", "anthropic": "sk-ant-cost-benchmark-0123"}
LIST_ITEMS = 3
TEXT_SHARE = 0.4
TEXT_MIN_CHARS = 240
SCALE_POINT = 0.7
"""Where numbers sit in their range: a 1–10 score is 7 (a critic this strong is not asked
again, as a weak one is)."""
GOAL_MODERATOR = 2.0
GOAL_DEBATERS = 5.0
GOAL_IDEAL = 1.3
GOAL_ROUNDS = 2.2
DEFAULT_JUDGES = Settings.model_fields["judges"].default


@dataclass(frozen=True)
class Config:
    name: str
    provider: str
    model: str | None = None
    """Every role's model, or None for the catalogue's defaults."""


CONFIGS = (
    Config("default Anthropic", "anthropic"),
    Config("default OpenAI", "openai"),
    Config("claude-opus-5-5 on every role", "anthropic", "claude-opus-5-5"),
    Config("gpt-6.2-sol on every role", "openai", "gpt-6.2-sol"),
)


@dataclass(frozen=True)
class Case:
    name: str
    question: str
    documents: list[ContextDocument]

    @property
    def document_tokens(self) -> float:
        return sum(estimate_tokens(doc.text) for doc in self.documents)


@dataclass(frozen=True)
class Scenario:
    name: str
    protocol: str | None = None
    rounds: int = 1
    baseline: str | None = None
    """For a single review: whose model reviews, `debaters` or `moderator`."""
    judges: int | None = None
    """Independent judges of a debate: None for the shipped default (`DEBATEBOT_JUDGES`)."""


SCENARIOS = (
    Scenario("single review, debaters' model", baseline="debaters"),
    Scenario("single review, moderator's model", baseline="moderator"),
    *(
        Scenario(f"{protocol}, {n} round{'s' if n > 1 else ''}", protocol, n)
        for protocol in PROTOCOLS
        for n in ROUNDS
        if n <= definition_for(protocol).max_rounds
    ),
)


def example_cases() -> tuple[Case, Case]:
    """The short case, and the long one: the same question with further example documents
    until they reach LONG_DOCUMENT_TOKENS."""
    cases = load_cases()
    first = next(c for c in cases if c["id"] == SHORT_CASE)
    documents = [ContextDocument(title=first["title"], text=first["context"])]
    short = Case(f"short ({SHORT_CASE})", first["question"], documents)
    more = list(documents)
    for other in cases:
        if sum(estimate_tokens(doc.text) for doc in more) >= LONG_DOCUMENT_TOKENS:
            break
        if other["id"] != SHORT_CASE:
            more.append(ContextDocument(title=other["title"], text=other["context"]))
    return short, Case(f"long ({SHORT_CASE} + {len(more) - 1} documents)", first["question"], more)


def vocabulary() -> list[str]:
    """The words of the example documents: what replies are written in."""
    text = " ".join(case["context"] for case in load_cases())
    return sorted({word.lower() for word in re.findall(r"[A-Za-z]{2,}", text)})


WORDS = vocabulary()


WORD_LIMIT = re.compile(r"at most (\d+) words")


def word_limit(request: LLMRequest) -> int | None:
    """The word limit the role's instructions set for the whole reply, if any (a diligent
    model keeps to it)."""
    found = WORD_LIMIT.search(request.messages[-1].content)
    return int(found.group(1)) if found else None


def realistic_reply(schema: dict[str, Any], index: int, max_words: int | None = None) -> Any:
    """A reply valid against `schema` (the engine's output schema, bounds included), the same
    for the same schema and call position `index`: free text at TEXT_SHARE of its length
    limit (shortened evenly to keep within `max_words`), LIST_ITEMS items a list, enums taken
    in turn from `index` (so consecutive callers vote differently and never agree early)."""
    share = 1.0
    while True:
        reply = _fill(schema, random.Random(index), index, share)
        words = len(" ".join(_strings(reply)).split())
        if max_words is None or words <= max_words:
            return reply
        share *= 0.9 * max_words / words


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _fill(node: dict[str, Any], rng: random.Random, turn: int, share: float, item: int = 0) -> Any:
    if "const" in node:
        return node["const"]
    if "enum" in node:
        choices = node["enum"]
        return choices[(turn + item) % len(choices)]
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        real = [o for o in options if o.get("type") != "null"] or options
        return _fill(real[0], rng, turn, share, item)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in node):
        return {key: _fill(sub, rng, turn, share, item) for key, sub in node["properties"].items()}
    if kind == "array":
        low, high = int(node.get("minItems", 0)), int(node.get("maxItems", LIST_ITEMS))
        count = max(low, min(high, LIST_ITEMS))
        items = node.get("items", {"type": "string"})
        return [_fill(items, rng, turn, share, position) for position in range(count)]
    if kind == "string":
        if "pattern" in node:
            return text_for_pattern(node["pattern"], item)
        return _text(node, rng, share)
    if kind == "integer":
        bottom = int(node.get("minimum", 0))
        return bottom + round((int(node.get("maximum", bottom)) - bottom) * SCALE_POINT)
    if kind == "number":
        floor = float(node.get("minimum", 0.0))
        return round(floor + (float(node.get("maximum", floor + 1.0)) - floor) * SCALE_POINT, 2)
    if kind == "boolean":
        return False
    return None


def _text(node: dict[str, Any], rng: random.Random, share: float) -> str:
    limit = node.get("maxLength")
    target = (
        TEXT_MIN_CHARS if limit is None else min(limit, max(TEXT_MIN_CHARS, limit * TEXT_SHARE))
    )
    target = max(target * share, int(node.get("minLength", 1)))
    words: list[str] = []
    while len(" ".join(words)) < target:
        words.append(rng.choice(WORDS))
    text = " ".join(words)
    return text[: int(limit)].rstrip() if limit is not None else text


@dataclass
class Recorded:
    """One `complete` call: when it started and ended on the benchmark's clock, the bodies its
    adapter sent (answered or refused) with their vendor, and the reply."""

    index: int
    at: float
    done: float = 0.0
    sent: list[dict[str, Any]] = field(default_factory=list)
    reply: str = ""
    model: str = ""
    bound: int | None = None
    """The input tokens the budget's bound allowed the call (`cost_checks.BOUND`)."""
    reported: int = 0
    """The input tokens the stand-in reported for it."""


_CURRENT: ContextVar[Recorded | None] = ContextVar("cost_benchmark_call", default=None)


@dataclass
class Recorder:
    """The calls of one scenario, on a clock where each call takes `call_s` and calls in
    flight together start at the same time."""

    call_s: float
    calls: list[Recorded] = field(default_factory=list)
    clock: float = 0.0

    def begin(self) -> Recorded:
        record = Recorded(index=len(self.calls), at=self.clock)
        self.calls.append(record)
        return record

    def end(self, record: Recorded) -> None:
        record.done = record.at + self.call_s
        self.clock = max(self.clock, record.done)


def hook(adapter: Any) -> None:
    """Record every request body `adapter` hands its SDK client: what the vendor receives."""
    if getattr(adapter, "_cost_benchmark_hooked", False):
        return
    vendor = "anthropic" if isinstance(adapter, AnthropicLLM) else "openai"
    # The adapters keep their SDK client private; the benchmark wraps its create() method.
    client = adapter._client
    resource = client.messages if vendor == "anthropic" else client.chat.completions
    original = resource.create

    async def create(**kwargs: Any) -> Any:
        sent = {"vendor": vendor, "body": json.loads(json.dumps(kwargs)), "answered": False}
        record = _CURRENT.get()
        if record is not None:
            record.sent.append(sent)
        response = await original(**kwargs)
        sent["answered"] = True
        return response

    resource.create = create
    adapter._cost_benchmark_hooked = True


class Recording:
    """A provider whose calls are recorded and answered with `realistic_reply`."""

    def __init__(self, inner: LLM, session: Session) -> None:
        self.inner = inner
        self.session = session
        hook(getattr(inner, "inner", inner))

    @property
    def provider(self) -> str:
        return self.inner.provider

    def price_of(self, model: str) -> Pricing:
        return self.inner.price_of(model)

    async def complete(self, request: LLMRequest) -> Completion:
        record = self.session.recorder.begin()
        record.model, record.bound = request.model, BOUND.get()
        token = _CURRENT.set(record)
        try:
            completion = await self.inner.complete(request)
        finally:
            _CURRENT.reset(token)
            self.session.recorder.end(record)
        record.reported = completion.usage.input_tokens
        if request.output_schema is None:
            record.reply = completion.text
            return completion
        reply = realistic_reply(request.output_schema, record.index, word_limit(request))
        if completion.enveloped and request.envelope is not None:
            # The adapter sent the protocol's envelope: the answer goes under the call's key,
            # as a model filling the envelope would put it (the stand-in answered the same way).
            reply = {request.envelope.key: reply}
        record.reply = json.dumps(reply)
        return completion.model_copy(update={"text": record.reply})


@dataclass
class Session:
    services: DebateServices
    call_s: float
    recorder: Recorder = field(init=False)

    def __post_init__(self) -> None:
        self.recorder = Recorder(self.call_s)

    def resolve(self, model: ModelSettings) -> LLM:
        return Recording(self.services.resolve_llm(model), self)


@dataclass
class Row:
    scenario: str
    protocol: str | None
    rounds_asked: int
    rounds_run: int
    calls: int
    refused: int
    input_tokens: float
    read_tokens: float
    write_tokens: float
    output_tokens: float
    vendor_usd: float
    ideal_usd: float
    usd_by_model: dict[str, float]
    output_usd: float
    """Of the vendor bill, what the output costs: no cache lowers it."""
    nocache_usd: float = 0.0
    """The same calls billed with no cache."""
    bounds: list[BoundRatio] = field(default_factory=list)
    vs_debaters: float = 0.0
    vs_moderator: float = 0.0

    @property
    def vendor_vs_ideal(self) -> float:
        return self.vendor_usd / self.ideal_usd if self.ideal_usd else 0.0

    @property
    def cache_vs_none(self) -> float:
        return self.vendor_usd / self.nocache_usd if self.nocache_usd else 0.0


def calls_of(records: Sequence[Recorded]) -> tuple[list[Call], int]:
    """The answered requests as the vendors' caches see them, and how many were refused."""
    calls: list[Call] = []
    refused = 0
    for record in records:
        output = estimate_tokens(record.reply)
        for sent in record.sent:
            if not sent["answered"]:
                refused += 1
                continue
            parse = anthropic_call if sent["vendor"] == "anthropic" else openai_call
            calls.append(parse(sent["body"], output_tokens=output, at=record.at, done=record.done))
    return calls, refused


async def run_scenario(
    session: Session, case: Case, scenario: Scenario
) -> tuple[list[Call], int, int]:
    """(calls, refused requests, rounds run) of one scenario; its recorder keeps each call's
    bound and reported input tokens."""
    services = session.services
    session.recorder = Recorder(session.call_s)
    if scenario.protocol is None:
        spec = services.policy.spec(case.question, context=case.documents, budget_usd=BUDGET_USD)
        if scenario.baseline == "moderator":
            moderator = spec.participant_for(Role.MODERATOR).model
            spec = spec.model_copy(update={"default_model": moderator})
        await single_review(spec, resolve_llm=session.resolve, prompts=services.prompts)
        rounds = 1
    else:
        extra: dict[str, Any] = STANCES if scenario.protocol == "stances" else {}
        spec = services.policy.spec(
            case.question,
            context=case.documents,
            protocol=scenario.protocol,
            rounds=scenario.rounds,
            budget_usd=BUDGET_USD,
            judges=scenario.judges,
            **extra,
        )
        spec = spec.model_copy(update={"min_rounds": scenario.rounds})
        numbers: set[int] = set()

        async def count_rounds(event: DebateEvent) -> None:
            if isinstance(event, RoundFinished):
                # Every shipped record numbers its round (the base type does not require it).
                numbers.add(int(getattr(event.record, "round", 0)))

        result = await run_debate(
            spec, resolve_llm=session.resolve, prompts=services.prompts, sink=count_rounds
        )
        if result.status is not DebateStatus.COMPLETE:
            raise SystemExit(f"{scenario.name} on {case.name}: {result.status}: {result.error}")
        # A structured debate's one round posts its four phases as numbered records.
        rounds = min(len(numbers), spec.max_rounds)
    calls, refused = calls_of(session.recorder.calls)
    return calls, refused, rounds


def summarise(
    scenario: Scenario,
    calls: list[Call],
    refused: int,
    rounds: int,
    catalog: Catalog,
    records: Sequence[Recorded] = (),
) -> Row:
    vendor, ideal = simulate(calls, lambda v, m: catalog.require_price(v, m))

    def total(bills: list[Bill], name: str) -> float:
        return float(sum(getattr(bill, name) for bill in bills))

    by_model: dict[str, float] = {}
    output_usd = 0.0
    for call, bill in zip(calls, vendor, strict=True):
        by_model[call.model] = by_model.get(call.model, 0.0) + bill.usd
        price = catalog.require_price(call.vendor, call.model)
        output_usd += charge(price, input_tokens=0, read=0, write=0, output=bill.output_tokens).usd

    return Row(
        scenario=scenario.name,
        protocol=scenario.protocol,
        rounds_asked=scenario.rounds,
        rounds_run=rounds,
        calls=len(calls),
        refused=refused,
        input_tokens=total(vendor, "input_tokens"),
        read_tokens=total(vendor, "read_tokens"),
        write_tokens=total(vendor, "write_tokens"),
        output_tokens=total(vendor, "output_tokens"),
        vendor_usd=total(vendor, "usd"),
        ideal_usd=total(ideal, "usd"),
        usd_by_model=by_model,
        output_usd=output_usd,
        nocache_usd=uncached_usd(calls, vendor, lambda c: catalog.require_price(c.vendor, c.model)),
        bounds=bound_ratios([(r.model, r.bound, r.reported) for r in records]),
    )


def judging_added(on: Row, off: Row) -> dict[str, Any]:
    """What the independent judging adds to one debate: the same scenario run with the default
    judges (`on`) and with none (`off`)."""
    added_usd = on.vendor_usd - off.vendor_usd
    return {
        "scenario": on.scenario,
        "calls": on.calls - off.calls,
        "input_tokens": on.input_tokens - off.input_tokens,
        "output_tokens": on.output_tokens - off.output_tokens,
        "usd": added_usd,
        "share": added_usd / off.vendor_usd if off.vendor_usd else 0.0,
        "usd_without": off.vendor_usd,
    }


@dataclass
class Goal:
    what: str
    goal: float
    measured: float
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.measured <= self.goal


def goals_of(rows: list[Row], *, long: bool, debaters: str, moderator: str) -> list[Goal]:
    """The issue's goals on one case's rows (the vendor ÷ ideal one on the long case only)."""
    by_name = {row.scenario: row for row in rows}
    one = by_name["adversarial, 1 round"]
    single_debaters = by_name[SCENARIOS[0].name].vendor_usd
    single_moderator = by_name[SCENARIOS[1].name].vendor_usd
    # What no cache can lower: the debate's output, and on the debaters' baseline the
    # moderator's calls when the moderator's model is another.
    alone = f"its output alone: {one.output_usd / single_moderator:.2f}"
    floors = [f"its output alone: {one.output_usd / single_debaters:.2f}"]
    if moderator != debaters:
        share = one.usd_by_model.get(moderator, 0.0) / single_debaters
        floors.append(f"the moderator's calls alone: {share:.2f}")
    worst = max(rows, key=lambda row: row.cache_vs_none)
    later = [(b.ratio, row.scenario) for row in rows for b in row.bounds if not b.first]
    firsts = [b.ratio for row in rows for b in row.bounds if b.first]
    bound_goals = []
    if later:
        ratio, where = max(later)
        share = sum(1 for r, _ in later if r <= GOAL_BOUND) / len(later)
        note = (
            f"at {where}; {share:.0%} of {len(later)} such calls within; the first call per"
            f" model, bounded a token per byte: {min(firsts):.2f} to {max(firsts):.2f}"
        )
        bound_goals.append(
            Goal(
                "bound ÷ actual input tokens, calls extending an earlier one",
                GOAL_BOUND,
                ratio,
                note,
            )
        )
    goals = [
        Goal(
            "caching ÷ no cache, the dearest scenario",
            GOAL_CACHE,
            worst.cache_vs_none,
            worst.scenario,
        ),
        *bound_goals,
        Goal(
            "adversarial, 1 round ÷ single review on the moderator's model",
            GOAL_MODERATOR,
            one.vs_moderator,
            alone,
        ),
        Goal(
            "adversarial, 1 round ÷ single review on the debaters' model",
            GOAL_DEBATERS,
            one.vs_debaters,
            "; ".join(floors),
        ),
    ]
    if long:
        goals += [
            Goal(f"vendor ÷ ideal cache, {row.scenario}", GOAL_IDEAL, row.vendor_vs_ideal)
            for row in rows
            if row.protocol is not None
        ]
    for protocol in PROTOCOLS:
        first, third = by_name.get(f"{protocol}, 1 round"), by_name.get(f"{protocol}, 3 rounds")
        if first and third:
            ratio = third.vendor_usd / first.vendor_usd
            goals.append(Goal(f"{protocol}, 3 rounds ÷ 1 round", GOAL_ROUNDS, ratio))
    return goals


async def measure(
    config: Config, cases: Sequence[Case], call_s: float, urls: dict[str, str]
) -> dict[str, Any]:
    settings = Settings(
        provider=config.provider,
        model=config.model,
        openai_api_key=SecretStr(KEYS["openai"]) if config.provider == "openai" else None,
        openai_base_url=urls["openai"],
        anthropic_api_key=(
            SecretStr(KEYS["anthropic"]) if config.provider == "anthropic" else None
        ),
        anthropic_base_url=urls["anthropic"],
        cross_family_moderator=False,
        llm_max_attempts=2,
        llm_backoff_base_s=0.01,
    )
    services = build_services(settings)
    session = Session(services, call_s)
    models = services.policy.models(None, None, None)
    catalog = services.registry.catalog
    report: dict[str, Any] = {
        "config": config.name,
        "debaters": models["debaters"].model,
        "moderator": models["moderator"].model,
        "cases": [],
    }
    try:
        for case in cases:
            rows = []
            unjudged = []
            for scenario in SCENARIOS:
                calls, refused, rounds = await run_scenario(session, case, scenario)
                records = session.recorder.calls
                rows.append(summarise(scenario, calls, refused, rounds, catalog, records))
                if scenario.protocol is not None:
                    off = replace(scenario, judges=0)
                    calls, refused, rounds = await run_scenario(session, case, off)
                    unjudged.append(summarise(off, calls, refused, rounds, catalog))
            debaters, moderator = rows[0].vendor_usd, rows[1].vendor_usd
            for row in rows:
                row.vs_debaters = row.vendor_usd / debaters
                row.vs_moderator = row.vendor_usd / moderator
            long = case is cases[-1]
            report["cases"].append(
                {
                    "case": case.name,
                    "document_tokens": round(case.document_tokens),
                    "rows": [
                        {
                            **asdict(row),
                            "vendor_vs_ideal": row.vendor_vs_ideal,
                            "cache_vs_none": row.cache_vs_none,
                            "bound_first": summary(row.bounds, first=True),
                            "bound_later": summary(row.bounds, first=False),
                        }
                        for row in rows
                    ],
                    "judging": [
                        judging_added(on, off)
                        for on, off in zip(rows[len(rows) - len(unjudged) :], unjudged, strict=True)
                    ],
                    "goals": [
                        {**asdict(goal), "passed": goal.passed}
                        for goal in goals_of(
                            rows,
                            long=long,
                            debaters=report["debaters"],
                            moderator=report["moderator"],
                        )
                    ],
                }
            )
    finally:
        await services.registry.aclose()
    return report


def cache_minimums(report: dict[str, Any]) -> str:
    """What the configuration's models cache from, said once above its tables."""
    if report["debaters"].startswith("gpt-"):
        return f"OpenAI caches prompts of {OPENAI_MIN_TOKENS:,} tokens or more"
    parts = []
    for model in dict.fromkeys((report["debaters"], report["moderator"])):
        assumed = "" if anthropic_min_documented(model) else " (not documented: assumed)"
        parts.append(f"{model} caches from {anthropic_min_tokens(model):,} tokens{assumed}")
    return "; ".join(parts)


def print_report(reports: list[dict[str, Any]], call_s: float) -> None:
    print(
        "Bills at the catalogue's prices (USD), tokens as UTF-8 bytes / 4, thinking not counted;"
        f" each call takes {call_s:g} s. ×deb, ×mod: the vendor bill ÷ a single review's on the"
        " debaters' / moderator's model. c÷n: the vendor bill ÷ the same calls with no cache."
        " b÷a: the budget's input bound ÷ the input tokens the stand-in reported (bytes / 4:"
        " simulated usage, no vendor key), median/max, for each model's first call in the"
        " debate and for the calls after it."
    )
    header = (
        f"{'scenario':<34} {'rnd':>3} {'calls':>5} {'tok in':>7} {'cache rd':>8} {'cache wr':>8}"
        f" {'tok out':>7} {'vendor $':>9} {'ideal $':>9} {'v÷i':>5} {'×deb':>6} {'×mod':>6}"
        f" {'c÷n':>5} {'b÷a 1st':>11} {'b÷a later':>11}"
    )
    for report in reports:
        models = f"debaters {report['debaters']}, moderator {report['moderator']}"
        print(f"\n== {report['config']}: {models}")
        print(f"   {cache_minimums(report)}")
        for case in report["cases"]:
            print(f"\n-- {case['case']} case, {case['document_tokens']:,} tokens of documents")
            print(header)
            for row in case["rows"]:
                rounds = "-" if row["protocol"] is None else str(row["rounds_run"])
                refused = f" ({row['refused']} refused)" if row["refused"] else ""
                print(
                    f"{row['scenario']:<34} {rounds:>3} {row['calls']:>5}"
                    f" {row['input_tokens']:>7,.0f} {row['read_tokens']:>8,.0f}"
                    f" {row['write_tokens']:>8,.0f} {row['output_tokens']:>7,.0f}"
                    f" {row['vendor_usd']:>9.5f} {row['ideal_usd']:>9.5f}"
                    f" {row['vendor_vs_ideal']:>5.2f} {row['vs_debaters']:>6.2f}"
                    f" {row['vs_moderator']:>6.2f} {row['cache_vs_none']:>5.2f}"
                    f" {row['bound_first']:>11} {row['bound_later']:>11}{refused}"
                )
            print(
                f"  judging (the default {DEFAULT_JUDGES} independent judge) adds per debate:"
                f" {'calls':>5} {'tok in':>7} {'tok out':>7} {'$':>9} {'share':>6}"
                f" {'$ without':>9}"
            )
            for added in case["judging"]:
                print(
                    f"  {added['scenario']:<66} {added['calls']:>5}"
                    f" {added['input_tokens']:>7,.0f} {added['output_tokens']:>7,.0f}"
                    f" {added['usd']:>9.5f} {added['share']:>6.0%} {added['usd_without']:>9.5f}"
                )
            for goal in case["goals"]:
                verdict = "PASS" if goal["passed"] else "FAIL"
                note = f" ({goal['note']})" if goal["note"] else ""
                print(
                    f"  {goal['what']}: goal ≤ {goal['goal']:g}, measured"
                    f" {goal['measured']:.2f} {verdict}{note}"
                )


async def run_all(call_s: float) -> list[dict[str, Any]]:
    openai_standin, anthropic_standin = OpenAIStandIn(), AnthropicStandIn()
    urls = {
        "openai": f"{await openai_standin.start()}/v1",
        "anthropic": await anthropic_standin.start(),
    }
    cases = example_cases()
    try:
        with bounds_watched():
            return [await measure(config, cases, call_s, urls) for config in CONFIGS]
    finally:
        await openai_standin.stop()
        await anthropic_standin.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--call-seconds", type=float, default=30.0, help="how long a call takes")
    args = parser.parse_args()
    # The shipped defaults are measured, whatever this shell configures.
    for name in [n for n in os.environ if n.startswith("DEBATEBOT_")]:
        del os.environ[name]
    reports = asyncio.run(run_all(args.call_seconds))
    if args.json:
        print(json.dumps({"call_seconds": args.call_seconds, "configs": reports}, indent=1))
    else:
        print_report(reports, args.call_seconds)


if __name__ == "__main__":
    main()
