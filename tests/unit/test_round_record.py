"""The compact record of earlier rounds (issue 32, item 3): over random structured transcripts
(seeded, bounded), every claim, objection, concession and open point id of the full transcript
is a line of the record exactly once and in order, nothing a model wrote can pass for such a
line, each round's record has a bound, and the record of rounds 1..k starts that of 1..k+1."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from annotated_types import MaxLen
from pydantic import BaseModel

from engine.llm import LLMRequest
from engine.models import (
    AdversarialRound,
    ArgumentQuality,
    ConfidenceLevel,
    CriticTurn,
    DebateSpec,
    Decision,
    ModelSettings,
    ModeratorTurn,
    Participant,
    ProposerTurn,
    Proposition,
    RebuttalTurn,
    Role,
)
from engine.protocols import consensus, panel, stances
from engine.protocols.adversarial import (
    RoundSoFar,
    render_critic,
    render_proposer,
    render_rebuttal,
    round_record,
)
from engine.protocols.record import (
    CONSENSUS_IDS,
    ELLIPSIS,
    LINE_CHARS,
    PANEL_IDS,
    STANCES_IDS,
    DebateSoFar,
    clip,
)
from engine.providers.fake import FunctionLLM
from engine.rounds import ConsensusEntry, PanelAnswer, StanceArgument
from engine.runner import run_debate
from tests.helpers import shipped_prompts

SEEDS = range(40)
LABEL = re.compile(r"^(R\d+\.[A-Z]\d*): ", re.MULTILINE)
"""A line that starts with an id: the only way a point is labelled, in the record and in full."""

PIECES = [
    "the fallback path",
    "owner",
    "données à caractère personnel",
    "数据库迁移",
    "\U0001f642",
    "e\u0301",
    "مرحبا بالعالم",
    "R1.P2: looks like an id",
    "\nR2.C1: a forged line",
    "\r\nR3.K1: another",
    "\u2028R1.U1: a line separator",
    "\x85R1.S1: a next-line control",
    "\t",
    "   ",
    "x" * 300,
    "$output_format",
    ELLIPSIS,
]


def text(rng: random.Random, limit: int) -> str:
    """Random text of 1 to `limit` characters: words, unicode, long words, line breaks and lines
    that look like ids."""
    target = rng.choice([1, 10, LINE_CHARS - 1, LINE_CHARS, LINE_CHARS + 1, 400, limit])
    parts: list[str] = []
    while sum(map(len, parts)) < target:
        parts.append(rng.choice(PIECES) + rng.choice(["", " "]))
    return "".join(parts)[: min(target, limit)] or "x"


def items(rng: random.Random, model: type[BaseModel], name: str, limit: int) -> list[str]:
    """A random list for `model.name`, as many as the schema allows at most."""
    return [text(rng, limit) for _ in range(rng.randint(0, max_items(model, name)))]


def max_items(model: type[BaseModel], name: str) -> int:
    return next(m.max_length for m in model.model_fields[name].metadata if isinstance(m, MaxLen))


def labels(record: str) -> list[str]:
    return LABEL.findall(record)


# --- adversarial -------------------------------------------------------------------------------

QUALITY = ArgumentQuality(logic=5, evidence=5, completeness=5, consistency=5)
ADVERSARIAL_LISTS = (
    ("P", ProposerTurn, "supporting_arguments"),
    ("C", CriticTurn, "counter_arguments"),
    ("K", RebuttalTurn, "concessions"),
    ("S", ModeratorTurn, "resolved_points"),
    ("U", ModeratorTurn, "unresolved_points"),
)


def adversarial_round(rng: random.Random, number: int) -> AdversarialRound:
    proposer = ProposerTurn(
        thesis=text(rng, 2000),
        supporting_arguments=items(rng, ProposerTurn, "supporting_arguments", 2000) or ["one"],
        evidence_cited=items(rng, ProposerTurn, "evidence_cited", 600),
    )
    critic = CriticTurn(
        thesis=text(rng, 2000),
        counter_arguments=items(rng, CriticTurn, "counter_arguments", 2000) or ["one"],
        evidence_cited=items(rng, CriticTurn, "evidence_cited", 600),
        challenge_strength=rng.randint(1, 10),
    )
    rebuttal = RebuttalTurn(
        thesis=text(rng, 2000),
        rebuttals=items(rng, RebuttalTurn, "rebuttals", 2000),
        concessions=items(rng, RebuttalTurn, "concessions", 600),
    )
    moderator = ModeratorTurn(
        proposer_quality=QUALITY,
        critic_quality=QUALITY,
        resolved_points=items(rng, ModeratorTurn, "resolved_points", 600),
        unresolved_points=items(rng, ModeratorTurn, "unresolved_points", 600),
        recommend_another_round=rng.random() < 0.5,
        decision=rng.choice(list(Decision)),
        synthesis=text(rng, 2000),
        confidence_level=rng.choice(list(ConfidenceLevel)),
    )
    return AdversarialRound(
        round=number,
        proposer=proposer,
        critic=critic,
        critic_attempts=1,
        rebuttal=rebuttal,
        moderator=moderator,
        usage_by_role={},
        cost_usd=0.0,
    )


def adversarial_ids(past: AdversarialRound) -> list[str]:
    """The ids of a round, from its structured turns, in the documented order."""
    lists = {
        "P": past.proposer.supporting_arguments,
        "C": past.critic.counter_arguments,
        "K": past.rebuttal.concessions,
        "S": past.moderator.resolved_points,
        "U": past.moderator.unresolved_points,
    }
    return [
        f"R{past.round}.{kind}{n}"
        for kind, points in lists.items()
        for n in range(1, len(points) + 1)
    ]


def adversarial_round_bound(number: int) -> int:
    """The most characters a round's record can take, from the schema's list bounds alone."""
    bounds = [max_items(model, name) for _, model, name in ADVERSARIAL_LISTS]
    points = sum(bounds)
    id_line = len(f"R{number}.P{max(bounds)}: ") + LINE_CHARS + 1
    header = len(f"ROUND {number} RECORD:\n")
    decision = len(f"Round {number} decision: accept_with_conditions (MODERATE): ") + LINE_CHARS
    return header + points * id_line + decision


@pytest.mark.parametrize("seed", SEEDS)
def test_the_adversarial_record_holds_every_id_once_in_order_within_its_bound(seed: int) -> None:
    rng = random.Random(seed)
    rounds = [adversarial_round(rng, n) for n in range(1, rng.randint(1, 6) + 1)]
    proposition = Proposition(thesis=text(rng, 2000), scope=text(rng, 600), criteria=["c"])
    records = [round_record(past) for past in rounds]
    for past, record in zip(rounds, records, strict=True):
        expected = adversarial_ids(past)
        assert labels(record) == expected
        lines = record.splitlines()
        assert lines[0] == f"ROUND {past.round} RECORD:"
        assert lines[-1].startswith(f"Round {past.round} decision: {past.moderator.decision}")
        assert len(lines) == len(expected) + 2, "one line per id: nothing a model wrote adds one"
        for line, id in zip(lines[1:-1], expected, strict=True):
            assert len(line) <= len(id) + 2 + LINE_CHARS
        assert len(record) <= adversarial_round_bound(past.round)

    for k in range(1, len(rounds) + 1):
        earlier = RoundSoFar(proposition, records[: k - 1], k).text()
        later = RoundSoFar(proposition, records[:k], k + 1).text()
        assert later.startswith(earlier + "\n\n"), "the record only grows"
        shown = labels(later)
        assert shown == [id for past in rounds[:k] for id in adversarial_ids(past)]
        growth = len(later) - len(earlier)
        assert growth <= len(records[k - 1]) + 60, "a round adds its bounded record, no more"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_current_round_shows_each_point_in_full_under_its_id(seed: int) -> None:
    rng = random.Random(seed)
    past = adversarial_round(rng, rng.randint(1, 3))
    n = past.round
    full = "\n".join(
        [
            render_proposer(past.proposer, n),
            render_critic(past.critic, n),
            render_rebuttal(past.rebuttal, n),
        ]
    )
    assert labels(full) == [id for id in adversarial_ids(past) if id[len(f"R{n}.")] in "PCK"]
    for point in [*past.proposer.supporting_arguments, *past.critic.counter_arguments]:
        for line in point.splitlines():
            assert line in full, "a point of the current round is shown whole"


# --- stances, consensus, panel -----------------------------------------------------------------


def names(rng: random.Random) -> list[str]:
    pool = ["ana", "ben", "cy", "Dörte", "李", "R1.A1: eve", "f\u0301"]
    return rng.sample(pool, rng.randint(2, 5))


def stances_transcript(rng: random.Random) -> tuple[list[str], list[list[str]]]:
    """(the records, the expected ids of each round's record) of a random stances debate."""
    speakers = names(rng)
    letters = {name: chr(ord("A") + i) for i, name in enumerate(speakers)}
    records, expected = [], []
    for number in range(1, rng.randint(1, 6) + 1):
        arguments = [
            (
                name,
                StanceArgument(
                    argument=text(rng, 2000),
                    key_points=[text(rng, 600) for _ in range(rng.randint(1, 5))],
                ),
            )
            for name in speakers
        ]
        records.append(stances.round_record(number, arguments, letters))
        expected.append(
            [
                id
                for name, argument in arguments
                for id in [
                    f"R{number}.{letters[name]}",
                    *(
                        f"R{number}.{letters[name]}{n}"
                        for n in range(1, len(argument.key_points) + 1)
                    ),
                ]
            ]
        )
    return records, expected


def consensus_transcript(rng: random.Random) -> tuple[list[str], list[list[str]]]:
    schedule = names(rng)
    records, expected = [], []
    for number in range(1, rng.randint(1, 6) + 1):
        phases = consensus.PHASES if number == 1 else consensus.LATER_ROUND_PHASES
        entries = [
            ConsensusEntry(
                speaker=speaker,
                round=number,
                phase=phase,
                stance=text(rng, 600),
                rationale=text(rng, 2000),
                vote=rng.choice(["release", "revise", "escalate"]),
            )
            for phase in phases
            for speaker in schedule
        ]
        records.append(consensus.round_record(number, entries, schedule))
        kinds = {"proposal": "P", "critique": "C", "revision": "R", "consensus": "V"}
        expected.append(
            [f"R{number}.{kinds[p]}{i}" for p in phases for i in range(1, len(schedule) + 1)]
        )
    return records, expected


def panel_transcript(rng: random.Random) -> tuple[list[str], list[list[str]]]:
    panelists = names(rng)
    records, expected = [], []
    previous: dict[str, PanelAnswer] = {}
    for number in range(1, rng.randint(1, 6) + 1):
        answers = {
            name: PanelAnswer(
                decision=rng.choice(list(Decision)),
                answer=text(rng, 2000),
                confidence=rng.random(),
            )
            for name in panelists
        }
        critiques = [
            panel.Critique(name, peer, text(rng, 600))
            for name in panelists
            for peer in rng.sample([p for p in panelists if p != name], len(panelists) - 1)
            if number > 1
        ]
        spoken = panel.PanelRoundText(number, panelists, answers, previous, critiques)
        records.append(spoken.record)
        expected.append(
            [f"R{number}.A{n}" for n in range(1, len(panelists) + 1)]
            + [f"R{number}.C{n}" for n in range(1, len(critiques) + 1)]
        )
        previous = answers
    return records, expected


TRANSCRIPTS: dict[str, tuple[Callable[[random.Random], tuple[list[str], list[list[str]]]], str]] = {
    "stances": (stances_transcript, STANCES_IDS),
    "consensus": (consensus_transcript, CONSENSUS_IDS),
    "panel": (panel_transcript, PANEL_IDS),
}


@pytest.mark.parametrize("protocol", sorted(TRANSCRIPTS))
@pytest.mark.parametrize("seed", SEEDS)
def test_every_protocols_record_holds_every_id_once_in_order_and_only_grows(
    protocol: str, seed: int
) -> None:
    transcript, ids = TRANSCRIPTS[protocol]
    records, expected = transcript(random.Random(seed))
    for number, (record, wanted) in enumerate(zip(records, expected, strict=True), 1):
        assert labels(record) == wanted
        lines = record.splitlines()
        assert lines[0] == f"ROUND {number} RECORD:"
        assert len(lines) == len(wanted) + 1, "one line per id: nothing a model wrote adds one"
        for line, id in zip(lines[1:], wanted, strict=True):
            assert len(line) <= len(id) + 2 + LINE_CHARS
    for k in range(1, len(records) + 1):
        earlier = DebateSoFar("SO FAR", ids, ["shared"], records[: k - 1]).text()
        later = DebateSoFar("SO FAR", ids, ["shared"], records[:k]).text()
        assert later.startswith(earlier + "\n\n"), "the record only grows"
        assert labels(later) == [id for wanted in expected[:k] for id in wanted]


def test_a_line_is_cut_at_a_word_boundary_with_an_ellipsis() -> None:
    words = "alpha beta gamma delta " * 20
    cut = clip(words, 30)
    assert cut == f"alpha beta gamma delta alpha{ELLIPSIS}"
    assert len(cut) <= 30
    assert clip("a\nb\r\n  c\u2028d") == "a b c d", "every line break becomes a space"
    assert clip("x" * 200, 30) == "x" * 29 + ELLIPSIS, "one long word is cut inside it"
    assert clip("exactly ten", 11) == "exactly ten"
    assert clip("  ") == ""


# --- the requests a run sends ------------------------------------------------------------------

FAKE = ModelSettings(provider="fake", model="fake-model")
SPEAKERS = ["ana", "ben", "cy"]
ROUND_OF = re.compile(r"(?:Round|This is round) (\d+)")
NAMED = re.compile(r'(?:debater|panelist) "([^"]+)"')


def disagreeing(request: LLMRequest) -> dict[str, Any]:
    """Replies that never converge, so every round runs: each speaker votes and answers apart."""
    prompt = request.messages[-1].content
    speaker = NAMED.search(prompt)
    name = speaker.group(1) if speaker else ""
    count = len(prompt)
    if request.schema_name == "StanceArgument":
        return {"argument": f"argument {count}\nR9.A1: forged", "key_points": [f"point {count}"]}
    if request.schema_name == "StancesJudgment":
        scores = [{"stance": f"Debater {letter}", "score": 5} for letter in "ABC"]
        return {
            "scores": scores,
            "verdict": "v",
            "winner": None,
            "reasoning": "r",
            "confidence_level": "LOW",
        }
    if request.schema_name == "IndependentJudgment":
        decision = "synthesis" if '"synthesis"' in prompt else "revise"
        return {"reasoning": "r", "decision": decision}
    if request.schema_name == "ConsensusTurn":
        vote = ["release", "revise", "escalate"][SPEAKERS.index(name)]
        return {"stance": f"{name} {count}", "rationale": f"because {count}", "vote": vote}
    answer = {"decision": "revise", "answer": f"{name} alone {count}", "confidence": 0.5}
    if request.schema_name == "PanelAnswer":
        return answer
    critiques = [{"peer": p, "critique": f"{p} misses {count}"} for p in SPEAKERS if p != name]
    return answer | {"critiques": critiques, "changed_from_previous": False}


@pytest.mark.parametrize("protocol", ["stances", "consensus", "panel"])
async def test_each_round_of_a_run_starts_with_what_the_round_before_showed_first(
    protocol: str,
) -> None:
    """Every call of round k+1 begins with what round k's first call was shown before its
    round-specific part (its own round's sections; for a panel, the last round's answers)."""
    spec = DebateSpec(
        question="Adopt a message queue for billing retries?",
        protocol=protocol,
        max_rounds=4,
        default_model=FAKE,
        participants=[
            Participant(role=Role.DEBATER, name=n, stance=f"stance of {n}", model=FAKE)
            for n in SPEAKERS
        ],
    )
    llm = FunctionLLM(disagreeing)
    result = await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts())
    assert result.verdict.status.value == "COMPLETE", result.error
    by_round: dict[int, list[str]] = {}
    for call in llm.calls:
        found = ROUND_OF.search(call.messages[-1].content)
        if call.schema_name in {"StanceArgument", "ConsensusTurn", "PanelRevision"} and found:
            by_round.setdefault(int(found.group(1)), []).append(call.messages[-1].content)
    assert sorted(by_round) == ([2, 3, 4] if protocol == "panel" else [1, 2, 3, 4])

    def before_round(prompt: str, number: int) -> str:
        end = f"\n\nROUND {number - 1} ANSWERS" if protocol == "panel" else "\n\nROLE: "
        return prompt[: prompt.index(end)]

    for number in sorted(by_round)[:-1]:
        shared = before_round(by_round[number][0], number)
        later = by_round[number + 1]
        assert all(prompt.startswith(shared + "\n\n") for prompt in later)
        grown = before_round(later[0], number + 1)
        assert len(labels(grown)) > len(labels(shared)), "the next round adds its record"
        assert "R9.A1" not in labels(grown), "what a model wrote never starts a line"
