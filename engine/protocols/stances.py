"""The `stances` protocol: debaters defend assigned stances, then one judge decides.

- At least two debaters, each with a unique name and a stance. Every debater speaks every round
  in the declared order and sees the stances by letter, earlier rounds as a compact record
  (each argument and key point by id, `engine.protocols.record`) and this round's earlier
  speakers in full, never a name. Their prompt forbids conceding.
- After the final round one judge scores every stance 1-10 and returns `{verdict, winner,
  reasoning}`; `winner: null` means the answer is a synthesis of stances. The judge's transcript
  is anonymized (labels instead of names) and shuffled within each round, both on by default and
  both switchable; the shuffle uses an injectable random generator (or `options.seed`), so it is
  reproducible.
- An optional synthesizer projects the raw result onto a caller-given JSON schema (a flat object
  of strings, numbers, booleans, enums and lists of those); a schema with the synthesizer off is
  an error.
- Default 2 rounds; more than 4 runs but logs a warning, kept in the report.

Confidence is measured by `engine.scoring`. What this protocol reports for it: the judge's
missing lead (the winner's score less the best other stance's, computed here; a lead of
`FULL_LEAD` points or more leaves nothing unanswered, none leaves everything), the judge's
declared level, and each round's arguments for an independent judge, who is asked beside the
last call (the judge's, or the synthesizer's when there is one): its record holds neither.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from engine.cache_plan import Planned, judges_planned
from engine.errors import LLMError, SpecError
from engine.events import RoundFinished
from engine.evidence import (
    DECLARED,
    NO_VERDICT,
    POSITION,
    BlindView,
    Entry,
    IndependentJudgment,
    Measure,
    ProtocolEvidence,
)
from engine.judging import judge_beside
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import (
    ConfidenceLevel,
    DebateResult,
    DebateSpec,
    Decision,
    LongText,
    Participant,
    Role,
    Score,
    Verdict,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import (
    Asker,
    Ending,
    built_once,
    choice_enum,
    common_verdict,
    finish,
    list_of,
    named_debaters,
    no_verdict,
    options_for,
)
from engine.protocols.outputs import Outputs
from engine.protocols.record import (
    STANCES_IDS,
    DebateSoFar,
    full_line,
    indented,
    point_id,
    record_line,
)
from engine.rounds import StanceArgument, StanceSpoken, StancesRound

__all__ = ["StanceArgument", "StancesProtocol"]

log = logging.getLogger("debatebot.engine")

WARN_ABOVE_ROUNDS = 4
_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


class StancesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    anonymize: bool = True
    shuffle: bool = True
    seed: int | None = None
    synthesizer: bool = False
    output_schema: dict[str, Any] | None = None


class StanceScore(BaseModel):
    stance: str
    score: Score


class JudgeDecisionBase(BaseModel):
    """The judge's reply: a score for every stance first (the lead the code computes from
    them is the verdict's margin), then the verdict."""

    scores: list[StanceScore] = Field(min_length=2, max_length=26)
    verdict: LongText
    winner: str | None
    reasoning: LongText
    confidence_level: ConfidenceLevel


@built_once
def judge_type(labels: list[str]) -> type[JudgeDecisionBase]:
    """The judge's schema with `winner` and each score's stance restricted to the debaters'
    labels (`winner` may be null), and every label scored once."""
    label = choice_enum("Label", labels)
    label_score = create_model("LabelScore", __base__=StanceScore, stance=(label, ...))
    winner: Any = label | None  # a label, or null for a synthesis

    class EveryStanceOnce(JudgeDecisionBase):
        @model_validator(mode="after")
        def _every_stance_once(self) -> EveryStanceOnce:
            scored = [_label(s.stance) for s in self.scores]
            if sorted(scored) != sorted(labels):
                raise ValueError(f"score every stance once: {', '.join(labels)}")
            return self

    return create_model(
        "StancesJudgment",
        __base__=EveryStanceOnce,
        scores=(list_of(label_score), Field(min_length=len(labels), max_length=len(labels))),
        winner=(winner, ...),
    )


def _label(value: object) -> str:
    return str(getattr(value, "value", value))


FULL_LEAD = 4
"""A judge's lead (winner's score less the next stance's, on the 1-10 scale) that counts as
settled: the stances' unanswered share is 1 - lead / FULL_LEAD, at least 0."""


def judge_margin(judgment: dict[str, Any]) -> Measure:
    """What the judge left unanswered: its missing lead of the winner (for a synthesis, of the
    best stance) over the next."""
    scores = {str(s["stance"]): int(s["score"]) for s in judgment.get("scores") or []}
    if len(scores) < 2:
        return Measure(None)
    winner = judgment.get("winner")
    ranked = sorted(scores.values(), reverse=True)
    if winner is not None and winner in scores:
        top = scores[winner]
        runner_up = max(v for label, v in scores.items() if label != winner)
    else:
        top, runner_up = ranked[0], ranked[1]
    lead = top - runner_up
    value = 1.0 - min(1.0, max(0, lead) / FULL_LEAD)
    return Measure(value, f"judge's lead {lead} of 10 (scores {top} and {runner_up})")


def model_from_schema(schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model for a caller's flat JSON object schema; SpecError if it is not one."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise SpecError('the output schema must be {"type": "object", "properties": {...}}')
    required = set(schema.get("required", schema["properties"]))
    fields: dict[str, Any] = {}
    for name, node in schema["properties"].items():
        annotation = _field_type(name, node)
        fields[name] = (annotation, ...) if name in required else (annotation | None, None)
    model: type[BaseModel] = create_model("SynthesisOutput", **fields)
    return model


def _field_type(name: str, node: Any) -> Any:
    if not isinstance(node, dict):
        raise SpecError(f"output schema field {name!r} is not a schema object")
    if "enum" in node:
        return Enum(f"{name}_choices", {str(v): v for v in node["enum"]})
    kind = node.get("type")
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    if kind == "array":
        return list_of(_field_type(name, node.get("items", {})))
    raise SpecError(
        f"output schema field {name!r} has type {kind!r}; use string, integer, number, boolean,"
        " an enum, or an array of those"
    )


@functools.lru_cache(maxsize=64)
def stances_outputs(synthesis_schema: str | None) -> Outputs:
    """The envelope of a stances debate: the judge's winner is a string there (restricted to
    the debate's labels by the judgment's own type); with a synthesizer, its caller-given
    schema (as JSON) is the one part that differs between debates."""
    types: dict[str, type[BaseModel]] = {
        "StanceArgument": StanceArgument,
        "StancesJudgment": JudgeDecisionBase,
        "IndependentJudgment": IndependentJudgment,
    }
    if synthesis_schema is not None:
        types["SynthesisOutput"] = model_from_schema(json.loads(synthesis_schema))
    return Outputs("stances", types)


def projected_schema(options: StancesOptions) -> str | None:
    """The synthesizer's schema as JSON (`stances_outputs`' key), when there is one."""
    if options.synthesizer and options.output_schema is not None:
        return json.dumps(options.output_schema, sort_keys=True)
    return None


def planned_calls(
    spec: DebateSpec, debaters: list[Participant], *, synthesizer: bool
) -> list[Planned]:
    """The calls of a stances debate in order, every round it may run included: each round's
    debaters in their order (each extending the round's debate so far), then the judge and the
    synthesizer (reading a transcript of their own), then the independent judges."""
    rounds = [
        Planned(number, Role.DEBATER, debater.name or "")
        for number in range(1, spec.max_rounds + 1)
        for debater in debaters
    ]
    closing = [Planned(spec.max_rounds, Role.JUDGE, extends=False)]
    if synthesizer:
        closing.append(Planned(spec.max_rounds, Role.SYNTHESIZER, extends=False))
    return [*rounds, *closing, *judges_planned(spec)]


def labels_for(debaters: list[Participant], anonymize: bool) -> dict[str, str]:
    """Debater name -> what the judge sees."""
    if not anonymize:
        return {d.name or "": d.name or "" for d in debaters}
    return {d.name or "": f"Debater {chr(ord('A') + i)}" for i, d in enumerate(debaters)}


class StancesProtocol:
    """Assigned stances, no conceding, one anonymized and shuffled judgment."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng

    def validate(self, spec: DebateSpec) -> None:
        options = options_for(StancesOptions, spec)
        if len(spec.debaters()) < 2:
            raise SpecError(
                "the stances protocol needs at least two debaters, each with a stance: give them"
                " with --for and --against, e.g. --for 'adopt it now' --against 'keep what we"
                " have'"
            )
        named_debaters(spec)
        debaters = spec.debaters()
        missing = [d.name for d in debaters if not (d.stance or "").strip()]
        if missing:
            raise SpecError(f"every stances debater needs a stance; missing for {missing}")
        if options.output_schema is not None and not options.synthesizer:
            raise SpecError(
                "an output schema needs the synthesizer: set options.synthesizer to true, or drop"
                " the schema"
            )
        if options.output_schema is not None:
            model_from_schema(options.output_schema)
        if len(debaters) > 26:
            raise SpecError("the stances protocol takes at most 26 debaters")

    @staticmethod
    def warnings(spec: DebateSpec) -> list[str]:
        if spec.max_rounds > WARN_ABOVE_ROUNDS:
            return [
                f"{spec.max_rounds} rounds asked for; past {WARN_ABOVE_ROUNDS} stance debates"
                " mostly repeat themselves and cost grows with every round"
            ]
        return []

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        options = options_for(StancesOptions, spec)
        warnings = self.warnings(spec)
        for warning in warnings:
            log.warning("stances: %s", warning)
        rng = self.rng or random.Random(options.seed)
        debaters = spec.debaters()
        stance_of = {d.name or "": d.stance or "" for d in debaters}
        labels = labels_for(debaters, options.anonymize)
        projection = projected_schema(options)
        asker = Asker(
            spec=spec, ledger=ledger, prompts=prompts, outputs=stances_outputs(projection)
        )
        ledger.planned(planned_calls(spec, debaters, synthesizer=projection is not None))
        ending = Ending()
        spoken: list[tuple[int, str, StanceArgument]] = []
        judgment: JudgeDecisionBase | None = None
        winner: str | None = None
        synthesis: dict[str, Any] | None = None
        judge_view = ""
        try:
            letters = stance_letters(debaters)
            shared = [render_stances(letters, stance_of)]
            records: list[str] = []
            for number in range(1, spec.max_rounds + 1):
                so_far = DebateSoFar("THE DEBATE SO FAR", STANCES_IDS, shared, records)
                for debater in debaters:
                    name = debater.name or ""
                    argument = await asker.ask(
                        "stances/debater.md",
                        round=number,
                        role=Role.DEBATER,
                        speaker=name,
                        step=f"arguing \u201c{stance_of[name]}\u201d",
                        output_type=StanceArgument,
                        values={
                            "round": str(number),
                            "rounds": str(spec.max_rounds),
                            "letter": letters[name],
                            "stance": stance_of[name],
                        },
                        so_far=so_far.sections(),
                    )
                    spoken.append((number, name, argument))
                    so_far.add(render_argument(number, letters[name], argument))
                this_round = [(n, a) for r, n, a in spoken if r == number]
                records.append(round_record(number, this_round, letters))
                await ledger.emit(
                    RoundFinished(
                        record=StancesRound(
                            round=number,
                            max_rounds=spec.max_rounds,
                            arguments=[
                                StanceSpoken(speaker=n, stance=stance_of[n], argument=a)
                                for n, a in this_round
                            ],
                        )
                    )
                )
            judge_view = render_judge_view(spoken, stance_of, labels, options.shuffle, rng)
            # The independent judges read the arguments alone, which neither the judge nor the
            # synthesizer can change: they run beside the last of those calls.
            blind = record_view(spec, spoken, decided="")
            if projection is None:
                judge_beside(blind, ledger=ledger, prompts=prompts)
            judgment = await asker.ask(
                "stances/judge.md",
                round=spec.max_rounds,
                role=Role.JUDGE,
                output_type=judge_type(list(labels.values())),
                values={
                    "stances": "\n".join(f"- {labels[n]}: {s}" for n, s in stance_of.items()),
                    "transcript": judge_view,
                },
            )
            label = getattr(judgment.winner, "value", judgment.winner)
            winner = next((n for n, shown in labels.items() if shown == label), None)
            if options.synthesizer and options.output_schema is not None:
                judge_beside(blind, ledger=ledger, prompts=prompts)
                projected = await asker.ask(
                    "stances/synthesizer.md",
                    round=spec.max_rounds,
                    role=Role.SYNTHESIZER,
                    output_type=model_from_schema(options.output_schema),
                    values={
                        "judgment": judgment.model_dump_json(),
                        "transcript": judge_view,
                    },
                )
                synthesis = projected.model_dump(mode="json")
        except (BudgetExhausted, LLMError) as stop:
            ending.record(stop)
        report: dict[str, Any] = {
            "speaking_order": [d.name for d in debaters],
            "labels": labels if options.anonymize else None,
            "judge_transcript": judge_view,
            "judgment": judgment.model_dump(mode="json") if judgment else None,
            "winner": winner,
            "synthesis": synthesis,
            "warnings": warnings,
        }
        return finish(
            spec,
            ledger,
            ending,
            self._verdict(spec, ending, judgment, winner, stance_of),
            started_at=started_at,
            report=report,
        )

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """The judge's missing lead and level, and the arguments for an independent judge."""
        report = result.report or {}
        judgment = report.get("judgment")
        if not judgment:
            return NO_VERDICT
        level = ConfidenceLevel(judgment["confidence_level"])
        return ProtocolEvidence(
            reached=True,
            unanswered=judge_margin(judgment),
            declared=DECLARED[level],
            declared_note=f"judge declared {level.value}",
            view=self._blind_view(result, report.get("winner")),
        )

    @staticmethod
    def _blind_view(result: DebateResult, winner: str | None) -> BlindView:
        """The arguments of a finished debate as the judges read them (`record_view`)."""
        spoken = [
            (turn.round, turn.speaker, StanceArgument.model_validate(turn.parsed))
            for turn in result.transcript
            if turn.role is Role.DEBATER
        ]
        names = [d.name or "" for d in result.spec.debaters()]
        decided = f"{POSITION}{names.index(winner)}" if winner in names else "synthesis"
        return record_view(result.spec, spoken, decided=decided)

    @staticmethod
    def _verdict(
        spec: DebateSpec,
        ending: Ending,
        judgment: JudgeDecisionBase | None,
        winner: str | None,
        stance_of: dict[str, str],
    ) -> Verdict:
        if judgment is None:
            return no_verdict(spec, ending)
        if winner is not None:
            decision = Decision.ACCEPT
            synthesis = f"{winner} prevails ({stance_of[winner]}): {judgment.verdict}"
        else:
            decision = Decision.ACCEPT_WITH_CONDITIONS
            synthesis = f"Synthesis of the stances: {judgment.verdict}"
        return common_verdict(
            spec,
            ending,
            decision=decision,
            synthesis=synthesis,
            declared=judgment.confidence_level,
        )


def record_view(
    spec: DebateSpec, spoken: list[tuple[int, str, StanceArgument]], *, decided: str
) -> BlindView:
    """Every debater's arguments, round by round, under its stance; a judge names the stance
    that prevails or a synthesis. Nothing the judge or the synthesizer says, so the same
    before they answer and after."""
    options = options_for(StancesOptions, spec)
    names = [d.name or "" for d in spec.debaters()]
    entries = [
        Entry(
            names.index(name),
            number,
            "\n".join([argument.argument, *(f"* {point}" for point in argument.key_points)]),
        )
        for number, name, argument in spoken
        if name in names
    ]
    return BlindView(
        positions=tuple(f"argues: {d.stance}" for d in spec.debaters()),
        entries=tuple(entries),
        choices=("synthesis",),
        pick_position=True,
        explain=(
            'the position whose stance prevails ("Position A", ...), or "synthesis" when'
            " the best answer combines stances"
        ),
        decided=decided,
        decided_by=spec.participant_for(Role.JUDGE).model,
        outputs=stances_outputs(projected_schema(options)),
        round=spec.max_rounds,
        names=tuple(names),
    )


def stance_letters(debaters: list[Participant]) -> dict[str, str]:
    """Debater name -> the letter of its stance in the declared order, which the debaters' ids
    use (`engine.protocols.record`); debaters never see each other's names."""
    return {d.name or "": chr(ord("A") + i) for i, d in enumerate(debaters)}


def render_stances(letters: dict[str, str], stance_of: dict[str, str]) -> str:
    return "STANCES:\n" + "\n".join(
        f"{letter}: {indented(stance_of[name])}" for name, letter in letters.items()
    )


def render_argument(number: int, letter: str, argument: StanceArgument) -> str:
    """An argument of the current round in full, with its key points, labelled by id."""
    lines = [
        f"STANCE {letter}, ROUND {number}, IN FULL:",
        full_line(point_id(number, letter), argument.argument),
        *(full_line(point_id(number, letter, n), p) for n, p in enumerate(argument.key_points, 1)),
    ]
    return "\n".join(lines)


def round_record(
    number: int, arguments: list[tuple[str, StanceArgument]], letters: dict[str, str]
) -> str:
    """One finished round as a compact record: each argument and its key points, by stance."""
    lines = [f"ROUND {number} RECORD:"]
    for name, argument in arguments:
        letter = letters[name]
        lines.append(record_line(point_id(number, letter), argument.argument))
        lines += [
            record_line(point_id(number, letter, n), point)
            for n, point in enumerate(argument.key_points, 1)
        ]
    return "\n".join(lines)


def render_judge_view(
    spoken: list[tuple[int, str, StanceArgument]],
    stance_of: dict[str, str],
    labels: dict[str, str],
    shuffle: bool,
    rng: random.Random,
) -> str:
    """The judge's transcript: by round, speakers labelled, order shuffled within each round."""
    rounds: dict[int, list[tuple[str, StanceArgument]]] = {}
    for number, name, argument in spoken:
        rounds.setdefault(number, []).append((name, argument))
    parts = []
    for number, entries in rounds.items():
        ordered = list(entries)
        if shuffle:
            rng.shuffle(ordered)
        lines = [f"Round {number}:"]
        for name, argument in ordered:
            lines.append(f"[{labels[name]} | stance: {stance_of[name]}] {argument.argument}")
            lines.extend(f"    * {point}" for point in argument.key_points)
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
