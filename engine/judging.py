"""Independent judges: a debate's record judged again, blind to its verdict.

Each judge reads the record its protocol gives (`engine.evidence.BlindView`): speakers hidden
behind position letters, and the turns of each round shuffled (a generator seeded by the
question and the judge, so a resumed run asks the same); no verdict, moderator, vote count or
stated confidence. The first judge, and every odd one, sees the sides swapped (letters given
from the last position to the first, so the side that spoke first in the debate is no longer
A); the even ones see them in the debate's order. A judge's decision is compared with the
verdict's (`BlindView.same`): the share of judges reaching it is the verdict's agreement.

A judge runs on the model its participant in the spec names (`judge-1`, `judge-2`, ...: the
composition root picks the debaters' tier, another family's when its key is set) or, when the
spec names none, on the model that decided the debate. Position bias is a decision that flips
with the sides and nothing else: a swapped judge on the deciding model reaching another decision
than the verdict, or two judges on one model, one swapped and one not, reaching different ones.

A protocol whose last call cannot change the record starts the judges beside that call
(`judge_beside`, kept on the ledger as `TurnLedger.judging`), once it holds its worst case
against the budget; their answers are then compared with the verdict once it is out. Judges
are asked through the debate's ledger, like every turn: recorded, replayed on resume, charged
to the debate and refused when its budget cannot afford them (then the confidence is
unverified, and the verdict says why).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import create_model

from engine.errors import DebateHaltedError, LLMError
from engine.evidence import MARK, POSITION, BlindView, IndependentJudgment, Measure
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import DebateSpec, JudgeCheck, ModelSettings, Participant, Role
from engine.prompts import PromptLibrary
from engine.protocols.base import Asker, built_once, choice_enum

TEMPLATE = "common/independent_judge.md"


@built_once
def judgment_type(choices: list[str]) -> type[IndependentJudgment]:
    """The judgment's schema with `decision` restricted to `choices` (the same for every debate
    of a protocol, so built once)."""
    choice = choice_enum("Choice", choices)
    return create_model("IndependentJudgment", __base__=IndependentJudgment, decision=(choice, ...))


def letters(view: BlindView, *, swapped: bool) -> dict[int, str]:
    """Position index -> the letter the judge sees; swapped, A goes to the last position."""
    order = list(range(len(view.positions)))
    if swapped:
        order.reverse()
    return {position: chr(ord("A") + n) for n, position in enumerate(order)}


@dataclass(frozen=True)
class Rendered:
    """The record as one judge reads it, and the decisions it may give."""

    positions: str
    record: str
    choices: dict[str, str]
    """What the judge may answer -> the decision it stands for (`position:<i>` for a letter)."""


def render(view: BlindView, *, swapped: bool, rng: random.Random) -> Rendered:
    """`view` with positions lettered (swapped or not) and each round's turns shuffled."""
    letter = letters(view, swapped=swapped)
    by_letter = sorted(letter, key=lambda position: letter[position])

    def named(text: str) -> str:
        return MARK.sub(lambda m: letter.get(int(m.group(1)), "?"), text)

    positions = "\n".join(f"Position {letter[p]}: {named(view.positions[p])}" for p in by_letter)
    if view.preface:
        positions = f"{named(view.preface)}\n\n{positions}"
    rounds: dict[int, list[str]] = {}
    for entry in sorted(view.entries, key=lambda e: (e.round, letter[e.position])):
        body = "\n    ".join(named(entry.text).splitlines())
        rounds.setdefault(entry.round, []).append(f"[Position {letter[entry.position]}] {body}")
    parts = []
    for number, turns in rounds.items():
        rng.shuffle(turns)
        title = view.phases[number - 1] if 0 < number <= len(view.phases) else f"Round {number}"
        parts.append(f"{title}:\n" + "\n\n".join(turns))
    choices = {choice: choice for choice in view.choices}
    if view.pick_position:
        choices |= {f"Position {letter[p]}": f"{POSITION}{p}" for p in by_letter}
    return Rendered(positions, "\n\n".join(parts), choices)


def judge_models(spec: DebateSpec, view: BlindView) -> list[tuple[str, ModelSettings]]:
    """(name, model) of each of the spec's judges: its participant's model, or the model that
    decided the debate."""
    named: dict[str, Participant] = {
        p.name or "": p for p in spec.participants if p.role is Role.INDEPENDENT_JUDGE
    }
    judges = []
    for n in range(1, spec.judges + 1):
        name = f"judge-{n}"
        chosen = named.get(name)
        judges.append((name, chosen.model if chosen is not None else view.decided_by))
    return judges


def _same_model(a: ModelSettings, b: ModelSettings) -> bool:
    return (a.provider, a.model) == (b.provider, b.model)


@dataclass(frozen=True)
class Agreement:
    """What the judges found: each judge's check, the agreement and position-bias components,
    and why the confidence is unverified when no judge answered."""

    checks: list[JudgeCheck]
    agreement: Measure
    position_bias: Measure
    unverified: str | None


def unverified(why: str) -> Agreement:
    """No judge answered, for `why`."""
    return Agreement([], Measure(None, f"confidence unverified: {why}"), Measure(None), why)


Heard = str | LLMError
"""What one judge gave: its decision (as the view's choices stand for it), or its failure."""


async def _hear(
    spec: DebateSpec, view: BlindView, asker: Asker, n: int, name: str, model: ModelSettings
) -> str:
    """Judge `name` (the `n`th) asked for its decision on the blind record; raises
    BudgetExhausted, DebateHaltedError and LLMError as the ledger does."""
    shown = render(view, swapped=n % 2 == 1, rng=random.Random(f"{spec.question}\x1f{name}"))
    answer = await asker.ask(
        TEMPLATE,
        round=view.round,
        role=Role.INDEPENDENT_JUDGE,
        speaker=name,
        step="judging the record again, blind to the verdict",
        output_type=judgment_type(list(shown.choices)),
        values={"positions": shown.positions, "record": shown.record, "decisions": view.explain},
        model=model,
    )
    return shown.choices[str(getattr(answer.decision, "value", answer.decision))]


def judge_beside(view: BlindView, *, ledger: TurnLedger, prompts: PromptLibrary) -> None:
    """Start the spec's judges (if it has any) on `view` beside the protocol's next call, its
    last: the record they read is final and that call cannot change it (judges read it blind
    to the verdict), so the verdict need not wait for them. They start once that call holds
    its worst case, so they never take the room it needs (`TurnLedger.next_call_under_way`)."""
    if not ledger.spec.judges:
        return
    under_way = ledger.next_call_under_way()

    async def judges() -> dict[str, Heard]:
        await under_way
        return await hear_early(ledger.spec, view, ledger=ledger, prompts=prompts)

    ledger.judging = asyncio.ensure_future(judges())


async def hear_early(
    spec: DebateSpec, view: BlindView, *, ledger: TurnLedger, prompts: PromptLibrary
) -> dict[str, Heard]:
    """Every judge asked at once on `view`, beside the protocol's last call (`judge_beside`).
    A judge the budget or a halt refuses now is left out: `judge_again` asks it after the
    verdict, in order, so the budget allows what it would allow one call after another."""
    asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=view.outputs)

    async def one(n: int, name: str, model: ModelSettings) -> tuple[str, Heard | None]:
        try:
            return name, await _hear(spec, view, asker, n, name, model)
        except (BudgetExhausted, DebateHaltedError):
            return name, None
        except LLMError as failure:
            return name, failure

    judges = judge_models(spec, view)
    answers = await asyncio.gather(*(one(n, *judge) for n, judge in enumerate(judges, 1)))
    return {name: heard for name, heard in answers if heard is not None}


async def judge_again(
    spec: DebateSpec,
    view: BlindView,
    *,
    ledger: TurnLedger,
    prompts: PromptLibrary,
    heard: Mapping[str, Heard] | None = None,
) -> Agreement:
    """Each of the spec's judges' decision on the blind record, compared with the verdict:
    taken from `heard` (asked beside the last call, `judge_beside`), else asked now, one after
    another (a judge the budget refuses leaves the later ones unasked, since they would be
    refused too); a failed judge is recorded with its error."""
    asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=view.outputs)
    early = dict(heard or {})
    checks: list[JudgeCheck] = []
    # Each answering judge's decision as agreement counts it (`BlindView.groups`).
    meant: dict[str, str] = {}
    stopped: str | None = None
    for n, (name, model) in enumerate(judge_models(spec, view), 1):
        check = JudgeCheck(
            judge=name,
            provider=model.provider,
            model=model.model,
            same_model=_same_model(model, view.decided_by),
            swapped=n % 2 == 1,
        )
        outcome = early.get(name)
        if outcome is None and stopped is not None:
            checks.append(check.model_copy(update={"error": stopped}))
            continue
        if outcome is None:
            try:
                outcome = await _hear(spec, view, asker, n, name, model)
            except BudgetExhausted as refused:
                stopped = f"the budget could not afford it ({refused})"
            except DebateHaltedError as halted:
                stopped = str(halted)
            except LLMError as failure:
                outcome = failure
            if outcome is None:
                checks.append(check.model_copy(update={"error": stopped}))
                continue
        if isinstance(outcome, LLMError):
            checks.append(check.model_copy(update={"error": f"the judge failed: {outcome}"}))
            continue
        meant[name] = view.groups.get(outcome, outcome)
        checks.append(
            check.model_copy(update={"decision": view.told(outcome), "agrees": view.same(outcome)})
        )
    return summarise(checks, meant)


def summarise(checks: list[JudgeCheck], meant: dict[str, str]) -> Agreement:
    """The components the judges' checks make; `meant` is each answering judge's decision as
    agreement counts it."""
    answered = [c for c in checks if c.agrees is not None]
    if not answered:
        why = next((c.error for c in checks if c.error), "no independent judge answered")
        return Agreement(checks, Measure(None, f"confidence unverified: {why}"), Measure(None), why)
    agree = sum(1 for c in answered if c.agrees)
    note = f"judges agree {agree} of {len(answered)}"
    if len(answered) < len(checks):
        note += f" ({len(checks) - len(answered)} gave no decision)"
    bias = position_bias(answered, meant)
    return Agreement(checks, Measure(agree / len(answered), note), bias, None)


def position_bias(answered: list[JudgeCheck], meant: dict[str, str]) -> Measure:
    """Whether swapping the sides flipped a decision: a swapped judge on the deciding model
    against the verdict, or a swapped and an unswapped judge on one model against each other.
    Not measured when no such pair answered."""
    pairs = [not c.agrees for c in answered if c.same_model and c.swapped]
    models = {(c.provider, c.model) for c in answered}
    for model in models:
        on = [c for c in answered if (c.provider, c.model) == model]
        pairs += [
            bool(a.agrees) != bool(b.agrees) for a in on if a.swapped for b in on if not b.swapped
        ]
    if not pairs:
        return Measure(None)
    if any(pairs):
        return Measure(1.0, "swapping the sides flipped a judge's decision")
    return Measure(0.0)
