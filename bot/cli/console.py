"""How a debate reads in a terminal: a line per turn while it runs, then the verdict."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, TextIO

from engine.events import DebateEvent, TurnFinished, TurnStarted
from engine.models import (
    ADVERSARIAL_ROLES,
    CriticTurn,
    DebateResult,
    ModeratorTurn,
    ProposerTurn,
    Proposition,
    RebuttalTurn,
    Role,
    TurnRecord,
)

if TYPE_CHECKING:
    pass


SPINNER = "|/-\\"


def clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_turn(turn: TurnRecord) -> list[str]:
    """A few readable lines about one turn, for the terminal."""
    if turn.role not in ADVERSARIAL_ROLES:
        return [
            f"{key}: {clip(value if isinstance(value, str) else json.dumps(value))}"
            for key, value in list(turn.parsed.items())[:4]
        ]
    if turn.role is Role.FRAMING:
        p = Proposition.model_validate(turn.parsed)
        return [f"thesis: {clip(p.thesis)}", f"criteria: {clip('; '.join(p.criteria))}"]
    if turn.role is Role.PROPOSER:
        pr = ProposerTurn.model_validate(turn.parsed)
        lines = [f"thesis: {clip(pr.thesis)}"]
        return lines + [f"+ {clip(arg)}" for arg in pr.supporting_arguments[:3]]
    if turn.role is Role.CRITIC:
        c = CriticTurn.model_validate(turn.parsed)
        lines = [f"thesis: {clip(c.thesis)}", f"challenge strength: {c.challenge_strength}/10"]
        return lines + [f"- {clip(arg)}" for arg in c.counter_arguments[:3]]
    if turn.role is Role.REBUTTAL:
        r = RebuttalTurn.model_validate(turn.parsed)
        lines = [f"thesis: {clip(r.thesis)}"]
        return lines + [f"concedes: {clip(c)}" for c in r.concessions[:2]]
    m = ModeratorTurn.model_validate(turn.parsed)
    return [
        f"decision: {m.decision.value} ({m.confidence_level.value})",
        f"argument quality: proposer {m.proposer_quality.mean:.1f}/10,"
        f" critic {m.critic_quality.mean:.1f}/10",
        f"synthesis: {clip(m.synthesis, 300)}",
        f"another round recommended: {'yes' if m.recommend_another_round else 'no'}",
    ]


class ConsoleEvents:
    """Prints each turn as it finishes, with a spinner on a terminal while a model generates."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.started = time.perf_counter()
        self._spinner: asyncio.Task[None] | None = None

    async def _spin(self, label: str) -> None:
        began = time.perf_counter()
        for frame in iter(int, 1):
            elapsed = time.perf_counter() - began
            self.err.write(f"\r{SPINNER[frame % 4]} {label} {elapsed:5.1f}s")
            self.err.flush()
            await asyncio.sleep(0.2)

    async def _stop_spinner(self) -> None:
        if self._spinner is None:
            return
        self._spinner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._spinner
        self._spinner = None
        self.err.write("\r\033[K")
        self.err.flush()

    async def __call__(self, event: DebateEvent) -> None:
        if isinstance(event, TurnStarted):
            label = (
                f"{event.role.value} (round {event.round}, attempt {event.attempt})"
                f" generating on {event.provider}:{event.model}"
            )
            if self.err.isatty():
                self._spinner = asyncio.create_task(self._spin(label))
            else:
                self.err.write(f"… {label}\n")
        elif isinstance(event, TurnFinished):
            await self._stop_spinner()
            turn = event.turn
            attempt = f" attempt {turn.attempt}" if turn.attempt > 1 else ""
            source = " [replayed]" if event.replayed else ""
            self.out.write(
                f"\n[round {turn.round}] {turn.role.value}{attempt}{source} ·"
                f" {turn.usage.input_tokens:,} in / {turn.usage.output_tokens:,} out tokens ·"
                f" {turn.latency_s:.1f}s · elapsed {time.perf_counter() - self.started:.1f}s\n"
            )
            for line in summarize_turn(turn):
                self.out.write(f"    {line}\n")
        else:
            await self._stop_spinner()
        self.out.flush()


def print_verdict(result: DebateResult, out: TextIO) -> None:
    v = result.verdict
    usage = result.usage
    out.write("\n" + "=" * 72 + "\n")
    out.write(f"STATUS      {v.status.value}\n")
    out.write(f"DECISION    {v.decision.value}\n")
    out.write(f"CONFIDENCE  {v.confidence:.2f} ({v.level.value})\n")
    if v.components is not None:
        out.write(f"MADE OF     {v.components.line()}\n")
    if v.weights_version is not None:
        out.write(f"            weights {v.weights_version}, each line adds to the logit:\n")
    for step in v.confidence_method:
        out.write(f"              {step.delta:+.2f}  {step.reason}\n")
    for check in result.judgments:
        said = check.decision or f"no decision: {check.error}"
        agrees = "" if check.agrees is None else " (agrees)" if check.agrees else " (disagrees)"
        out.write(f"JUDGE       {check.judge} on {check.provider}:{check.model}: {said}{agrees}\n")
    out.write(f"SYNTHESIS   {v.synthesis}\n")
    if v.unresolved_points:
        out.write("UNRESOLVED\n" + "".join(f"  - {p}\n" for p in v.unresolved_points))
    if v.uncertainties:
        out.write("UNCERTAIN\n" + "".join(f"  - {p}\n" for p in v.uncertainties))
    if result.flags:
        out.write(f"FLAGS       {', '.join(f.value for f in result.flags)}\n")
    fabricated = [c for c in result.citations if not c.verified]
    if fabricated:
        out.write("UNVERIFIED CITATIONS\n")
        out.write("".join(f"  - {c.role.value} r{c.round}: {clip(c.quote)}\n" for c in fabricated))
    if v.escalate:
        out.write("ESCALATE    " + "; ".join(v.escalation_reasons) + "\n")
    report = result.report or {}
    if "lines" in report:
        out.write("REPORT\n" + "".join(f"  {line}\n" for line in report["lines"]))
    for key in ("winner", "side_totals", "routing", "aggregation_fallback", "warnings"):
        if report.get(key):
            out.write(f"{key.upper():<12}{report[key]}\n")
    if result.error:
        out.write(f"ERROR       {result.error}\n")
    seconds = (result.finished_at - result.started_at).total_seconds()
    out.write(
        f"COST        ${result.cost_usd:.4f} · {usage.input_tokens:,} in /"
        f" {usage.output_tokens:,} out tokens · {len(result.transcript)} turns · {seconds:.1f}s\n"
    )
    out.flush()
