"""How each protocol reads in a thread: one message per round (or phase), the protocol's own
outcome in the verdict, and the live "who is speaking" line of the parent message.

Every string that came from a model is escaped; tables are monospaced text, which every Slack
client shows, and are cut to what a thread can hold (the export has everything).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.messages.kit import (
    Block,
    Message,
    bullets,
    clip,
    context,
    escape,
    header,
    paginate,
    sections,
)
from engine.events import TurnStarted
from engine.models import AdversarialRound, ArgumentQuality, DebateResult, DebateSpec, Role
from engine.rounds import (
    STRUCTURED_PHASES,
    ConsensusPhase,
    PanelRound,
    RoundRecord,
    StancesRound,
    StructuredPhase,
)

PHASE_TITLES = {
    "openings": "Openings",
    "cross_examination": "Cross-examination",
    "closings": "Closings",
    "judgment": "The judge's scores",
}
TABLE_ROWS = 24


def round_messages(record: RoundRecord, *, max_rounds: int) -> list[Message]:
    """One round or phase as one threaded message (more only if it is huge); `max_rounds` is the
    spec's, for the protocols whose record does not carry it."""
    if isinstance(record, AdversarialRound):
        title, body = _adversarial(record, max_rounds)
    elif isinstance(record, StancesRound):
        title, body = _stances(record)
    elif isinstance(record, ConsensusPhase):
        title, body = _consensus(record)
    elif isinstance(record, StructuredPhase):
        title, body = _structured(record)
    else:
        title, body = _panel(record)
    return paginate(escape(title), [header(title), *body])


def table(headings: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A small monospaced table as mrkdwn (cells escaped, at most `TABLE_ROWS` rows)."""
    shown = [list(headings), *[[str(c) for c in row] for row in rows[:TABLE_ROWS]]]
    widths = [max(len(row[i]) for row in shown) for i in range(len(headings))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in shown]
    more = f"\n\u2026 {len(rows) - TABLE_ROWS} more rows" if len(rows) > TABLE_ROWS else ""
    return "```\n" + escape("\n".join(line.rstrip() for line in lines)) + more + "\n```"


# --- one renderer per protocol -------------------------------------------------------------------


def _quality(label: str, quality: ArgumentQuality) -> str:
    return (
        f"{label}: logic {quality.logic}, evidence {quality.evidence},"
        f" completeness {quality.completeness}, consistency {quality.consistency}"
        f" (mean {quality.mean:.1f})"
    )


def _adversarial(record: AdversarialRound, max_rounds: int) -> tuple[str, list[Block]]:
    p, c, r, m = record.proposer, record.critic, record.rebuttal, record.moderator
    body = sections(
        f"*:large_blue_circle: Proposer*\n{escape(p.thesis)}\n{bullets(p.supporting_arguments)}"
    )
    critic_note = f" (asked {record.critic_attempts}\u00d7)" if record.critic_attempts > 1 else ""
    body += sections(
        f"*:red_circle: Critic* \u2014 challenge strength {c.challenge_strength}/10{critic_note}\n"
        f"{escape(c.thesis)}\n{bullets(c.counter_arguments)}"
    )
    rebuttal = f"*:large_blue_circle: Rebuttal*\n{escape(r.thesis)}\n{bullets(r.rebuttals)}"
    if r.concessions:
        rebuttal += f"\n_Concedes:_\n{bullets(r.concessions)}"
    body += sections(rebuttal)
    moderation = (
        f"*:scales: Moderator* \u2014 `{m.decision.value}`, {m.confidence_level.value}\n"
        f"{escape(m.synthesis)}"
    )
    if m.unresolved_points:
        moderation += f"\n_Unresolved:_\n{bullets(m.unresolved_points)}"
    body += sections(moderation)
    body.append(
        context(
            escape(_quality("proposer", m.proposer_quality))
            + " \u00b7 "
            + escape(_quality("critic", m.critic_quality))
            + f" \u00b7 round cost ${record.cost_usd:.4f}"
        )
    )
    return f"Round {record.round} of {max_rounds}", body


def _stances(record: StancesRound) -> tuple[str, list[Block]]:
    body: list[Block] = []
    for spoken in record.arguments:
        body += sections(
            f"*:speech_balloon: {escape(spoken.speaker)}* \u2014 for _{escape(spoken.stance)}_\n"
            f"{escape(spoken.argument.argument)}\n{bullets(spoken.argument.key_points)}"
        )
    return f"Round {record.round} of {record.max_rounds}", body


def _consensus(record: ConsensusPhase) -> tuple[str, list[Block]]:
    body: list[Block] = []
    for entry in record.contributions:
        body += sections(
            f"*{escape(entry.speaker)}* votes `{escape(entry.vote)}` \u2014"
            f" {escape(entry.stance)}\n{escape(entry.rationale)}"
        )
    rows = [
        [vote, f"{record.tally.get(vote, 0)}/{record.debaters}", _mark(vote, record)]
        for vote in record.votes
    ]
    tally = table(["vote", "votes", f"threshold {record.threshold}"], rows)
    outcome = (
        f":white_check_mark: `{escape(record.reached)}` reached the threshold; the vote ends here."
        if record.reached
        else "No option has reached the threshold yet."
    )
    body += sections(f"*Tally after the {escape(record.phase)} phase*\n{tally}\n{outcome}")
    title = f"Round {record.round} of {record.max_rounds} \u00b7 {record.phase} phase"
    return title, body


def _mark(vote: str, record: ConsensusPhase) -> str:
    return "reached" if record.tally.get(vote, 0) >= record.threshold else ""


def _structured(record: StructuredPhase) -> tuple[str, list[Block]]:
    body: list[Block] = []
    for side, arguments in record.openings.items():
        lines = [
            f"`{escape(a.id)}` *{escape(a.claim)}*\n{escape(a.reasoning)}\n"
            f"_evidence:_ {escape(a.evidence)}"
            for a in arguments
        ]
        body += sections(f"*{_side(record, side)}*\n" + "\n\n".join(lines))
    for side, answers in record.answers.items():
        lines = [
            f"`{escape(r.target)}` *{r.response.upper()}* \u2014 {escape(r.explanation)}\n"
            f"_asks:_ {escape(r.follow_up_question)}"
            for r in answers
        ]
        body += sections(f"*{_side(record, side)} answers*\n" + "\n".join(lines))
    for side, closing in record.closings.items():
        text = f"*{_side(record, side)}*\n{escape(closing.final_position)}"
        if closing.concessions:
            text += f"\n_Concedes:_\n{bullets(closing.concessions)}"
        if closing.unrebutted:
            text += f"\n_Unrebutted:_\n{bullets(closing.unrebutted)}"
        body += sections(text)
    judged = record.judgment
    if judged is not None:
        scores = [
            [
                arg,
                str(d.logic),
                str(d.evidence),
                str(d.responsiveness),
                str(d.honesty),
                f"{judged.weighted[arg]:.2f}",
            ]
            for arg, d in judged.scores.items()
        ]
        body += sections(
            "*Weighted scores* (logic .30, evidence .30, responsiveness .25, honesty .15)\n"
            + table(["argument", "logic", "evid.", "resp.", "hon.", "weighted"], scores)
        )
        totals = " \u00b7 ".join(f"{side} *{total:.2f}*" for side, total in judged.totals.items())
        leading = judged.leading_side or "neither (a tie)"
        body += sections(f"*Side totals:* {totals} \u2014 leading: {leading}")
        found = [
            f"{f.argument}: {f.fallacy.value} \u2014 {f.explanation}" for f in judged.fallacies
        ]
        body += sections(f"*Fallacies found ({len(found)})*\n{bullets(found) or '_none_'}")
        trace = [[arg, t.status, clip(t.note, 60)] for arg, t in judged.trace.items()]
        body += sections("*Argument trace*\n" + table(["argument", "status", "note"], trace))
        body += sections(
            f"*Judge:* `{judged.decision.value}`, {judged.confidence_level.value}\n"
            f"{escape(judged.recommendation)}"
        )
    number = STRUCTURED_PHASES.index(record.phase) + 1
    return f"{PHASE_TITLES[record.phase]} \u00b7 phase {number} of {len(STRUCTURED_PHASES)}", body


def _side(record: StructuredPhase, side: str) -> str:
    speaker = record.speakers.get(side, side.lower())
    return f"{side} ({escape(speaker)})" if speaker.upper() != side else side


def _panel(record: PanelRound) -> tuple[str, list[Block]]:
    body: list[Block] = []
    for spoken in record.answers:
        a = spoken.answer
        changed = {None: "", True: " \u00b7 _changed_", False: " \u00b7 _kept_"}[spoken.changed]
        body += sections(
            f"*{escape(spoken.speaker)}* \u2014 `{a.decision.value}`, confidence"
            f" {a.confidence:.2f}{changed}\n{escape(a.answer)}"
        )
    groups = " \u00b7 ".join("[" + ", ".join(escape(n) for n in c) + "]" for c in record.clusters)
    line = (
        f"*Clusters:* {groups}\n*Convergence* {record.convergence:.2f}"
        f" (stops at {record.threshold:.2f})"
    )
    if record.early_stop:
        line += "\n:checkered_flag: The panel converged; no more rounds."
    body += sections(line)
    return f"Round {record.round} of {record.max_rounds}", body


# --- the verdict's protocol outcome --------------------------------------------------------------


def outcome_sections(result: DebateResult) -> list[Block]:
    """The protocol's own outcome for the verdict message: the consensus report, the structured
    totals, the panel's aggregation, the stances judgment. Empty for adversarial debates (their
    verdict is the moderator's) and for runs that ended before an outcome."""
    report: dict[str, Any] = result.report or {}
    protocol = result.spec.protocol
    if protocol == "consensus" and report.get("lines"):
        return sections("*Consensus report*\n```\n" + escape("\n".join(report["lines"])) + "\n```")
    if protocol == "structured" and report.get("side_totals"):
        totals = report["side_totals"]
        leading = report.get("leading_side") or "neither (a tie)"
        return sections(
            f"*Structured outcome:* PRO {totals['PRO']:.2f} \u00b7 CON {totals['CON']:.2f}"
            f" \u2014 leading: {leading} \u00b7 {len(report.get('fallacies', []))} fallacies"
            f" \u00b7 {len(report.get('trace', []))} arguments traced"
        )
    if protocol == "panel" and report:
        return sections(_panel_outcome(report))
    if protocol == "stances" and report.get("judgment"):
        winner = report.get("winner")
        shown = f"*{escape(winner)}* prevails" if winner else "a synthesis of the stances"
        text = f"*Judgment:* {shown}"
        if report.get("synthesis"):
            pairs = [f"{k}: {v}" for k, v in report["synthesis"].items()]
            text += f"\n*Projected answer*\n{bullets(pairs)}"
        return sections(text)
    return []


def _panel_outcome(report: dict[str, Any]) -> str:
    if report.get("routing") == "single_agent":
        router = report.get("router") or {}
        return (
            "*Panel:* answered by the fast model alone (routing `single_agent`, confidence"
            f" {float(router.get('confidence', 0)):.2f}); no panel was convened."
        )
    rounds = report.get("rounds") or []
    text = f"*Panel:* aggregation `{escape(str(report.get('aggregation')))}`"
    if rounds:
        last = rounds[-1]
        groups = " \u00b7 ".join(
            "[" + ", ".join(escape(n) for n in c) + "]" for c in last["clusters"]
        )
        text += (
            f" \u00b7 {len(rounds)} round(s) \u00b7 final convergence {last['convergence']:.2f}"
            f"\n*Clusters:* {groups}"
        )
    if report.get("aggregation_fallback"):
        text += f"\n_Fell back to {escape(str(report['aggregation_fallback']))}_"
    return text


# --- live progress -------------------------------------------------------------------------------

_ADVERSARIAL_DOING = {
    Role.FRAMING: "framing is turning the question into a proposition",
    Role.PROPOSER: "proposer is making the case",
    Role.CRITIC: "critic is challenging the proposal",
    Role.REBUTTAL: "proposer is answering the critic",
    Role.MODERATOR: "moderator is weighing the arguments",
}


def progress(event: TurnStarted, spec: DebateSpec) -> tuple[str, str]:
    """The parent's status and its "who is speaking now" line for a turn that starts, e.g.
    ("running", "critic is challenging the proposal · round 1 of 2")."""
    judging = (Role.MODERATOR, Role.JUDGE, Role.INDEPENDENT_JUDGE)
    status = "moderating" if event.role in judging else "running"
    if event.role is Role.INDEPENDENT_JUDGE:
        return status, "an independent judge is reading the record again, blind to the verdict"
    if spec.protocol == "structured":
        where = f"phase {min(event.round, len(STRUCTURED_PHASES))} of {len(STRUCTURED_PHASES)}"
    elif event.round >= 1:
        where = f"round {event.round} of {spec.max_rounds}"
    else:
        where = "before the first round"
    if event.role in _ADVERSARIAL_DOING:
        doing = _ADVERSARIAL_DOING[event.role]
        if event.role is Role.CRITIC and event.attempt > 1:
            doing = "critic is pressing a stronger challenge"
        if event.role is Role.FRAMING:
            return status, doing
    elif event.role is Role.JUDGE:
        doing = "judge is scoring the arguments"
    elif event.role is Role.ROUTER:
        doing = "the fast model is answering first"
    elif event.role is Role.TRIAGE:
        return status, "checking whether this needs a debate"
    elif event.role is Role.SYNTHESIZER:
        doing = "synthesizer is writing the answer in the requested shape"
    else:
        doing = f"{event.speaker or 'a debater'} is {event.step or 'speaking'}"
    return status, f"{doing} \u00b7 {where}"
