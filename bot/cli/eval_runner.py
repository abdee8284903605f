"""`debatebot eval`: every arm on every case, stored as it finishes, scored and reported.

- Each (case, arm, variant) result is appended to `results.jsonl` in the output folder the
  moment it finishes (flushed and synced), so a rerun skips what is done; a failed arm is
  recorded with its reason, the other arms go on, and a rerun tries the failed one again.
- Cases run `--concurrency` at a time; within a case the arms run in turn, the vote after
  `single` and `adversarial` so its k can match the debate's tokens, best-of-n after the vote
  so it judges the vote's very samples.
- Before anything runs, the spend is estimated from the case lengths and the models' prices and
  printed; hosted providers need `--yes`. `--max-cost` stops before the next run would pass it.
- The report: `report.md` (tables per arm and per task type, how well each arm's confidence
  predicts a right verdict, and what the numbers mean),
  `results.json` (every raw result and the scores) and `frontier.png`/`.svg` (recall against
  tokens per case, per arm).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from engine.calibration.threshold import DEFAULT_TARGET
from engine.errors import EngineError
from engine.evaluation.arms import SINGLE_ARMS, ArmRunner, all_arms
from engine.evaluation.cases import EvalCase
from engine.evaluation.scoring import CLEAN, PLANTED, ArmResult, Scores, score
from engine.models import DEFAULT_PROTOCOL
from engine.protocols import PROTOCOLS

RESULTS = "results.jsonl"
SINGLE_CALLS = 1
"""Model calls of the single arm (a protocol's are its definition's `calls_per_run`)."""
PROMPT_OVERHEAD_TOKENS = 900
OUTPUT_TOKENS_PER_CALL = 350
CHARS_PER_TOKEN = 4


class EvalStopped(Exception):
    """The next run would pass `--max-cost`; what ran is stored and reported."""


@dataclass
class EvalPlan:
    cases: list[EvalCase]
    arms: list[str]
    out: Path
    concurrency: int = 2
    controls: bool = True
    vote_k: int | None = None
    max_cost_usd: float | None = None
    calibration_target: float = DEFAULT_TARGET
    """Share of wrong verdicts the report's calibrated threshold must escalate."""

    def variants(self, case: EvalCase) -> list[str]:
        return [PLANTED, CLEAN] if self.controls and case.clean_context else [PLANTED]

    def runs(self) -> list[tuple[EvalCase, str, str]]:
        """(case, arm, variant) in the order they run within each case."""
        order = [a for a in all_arms() if a in self.arms and a not in ("vote", "best_of_n")]
        order += [a for a in ("vote", "best_of_n") if a in self.arms]
        return [
            (case, arm, variant)
            for case in self.cases
            for variant in self.variants(case)
            for arm in order
        ]


class ResultStore:
    """`results.jsonl`: one line per finished run, appended and synced as it finishes."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / RESULTS
        self._lock = asyncio.Lock()
        # A kill mid-write leaves a cut line: end it, so the next result starts a line.
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb+") as existing:
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    existing.write(b"\n")

    def load(self) -> dict[tuple[str, str, str], ArmResult]:
        """The latest result of each run; a line cut off by a kill is ignored."""
        found: dict[tuple[str, str, str], ArmResult] = {}
        if not self.path.exists():
            return found
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                result = ArmResult.model_validate_json(line)
            except ValueError:
                continue
            found[result.key] = result
        return found

    async def append(self, result: ArmResult) -> None:
        async with self._lock:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(result.model_dump_json() + "\n")
                out.flush()
                os.fsync(out.fileno())


@dataclass
class Estimate:
    runs: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


PriceOf = Callable[[int, int], float]
"""(input tokens, output tokens) -> USD at the eval's models' prices."""


def estimate_run(case: EvalCase, arm: str, variant: str, vote_k: int, price: PriceOf) -> Estimate:
    """A rough, deliberately generous estimate of one run's tokens and cost."""
    text = case.clean_context if variant == CLEAN and case.clean_context else case.context
    prompt = (len(text) + len(case.question)) // CHARS_PER_TOKEN + PROMPT_OVERHEAD_TOKENS
    if arm == "vote":
        calls = vote_k
    elif arm == "best_of_n":
        calls = vote_k + 1
        prompt += OUTPUT_TOKENS_PER_CALL * vote_k // 2
    else:
        calls = SINGLE_CALLS if arm not in PROTOCOLS else PROTOCOLS[arm].calls_per_run
    tokens_in, tokens_out = calls * prompt, calls * OUTPUT_TOKENS_PER_CALL
    return Estimate(1, calls, tokens_in, tokens_out, price(tokens_in, tokens_out))


def estimate(plan: EvalPlan, done: set[tuple[str, str, str]], price: PriceOf) -> Estimate:
    total = Estimate(0, 0, 0, 0, 0.0)
    for case, arm, variant in plan.runs():
        if (case.id, arm, variant) in done:
            continue
        one = estimate_run(case, arm, variant, plan.vote_k or 5, price)
        total = Estimate(
            total.runs + 1,
            total.calls + one.calls,
            total.input_tokens + one.input_tokens,
            total.output_tokens + one.output_tokens,
            total.cost_usd + one.cost_usd,
        )
    return total


def matched_k(single: ArmResult | None, debate: ArmResult | None, fallback: int = 5) -> int:
    """The vote's sample count that spends about what the default debate spends: its tokens
    over a single answer's, made odd (a majority exists) and kept within 3..9."""
    if single is None or debate is None or not single.ok or not debate.ok:
        return fallback
    one = single.input_tokens + single.output_tokens
    if one <= 0:
        return fallback
    k = round((debate.input_tokens + debate.output_tokens) / one)
    k = max(3, min(9, k))
    return k if k % 2 else k + 1 if k < 9 else k - 1


@dataclass
class Progress:
    """One line on stderr: runs done, cases done, spend so far, time left."""

    runs_left: dict[str, int]
    """Runs still to go per case id; a case is done when none are left."""
    out: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    spent_usd: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        """Runs this invocation has to do: those done and those left."""
        return self.done + sum(self.runs_left.values())

    @staticmethod
    def of(plan: EvalPlan, done: set[tuple[str, str, str]], out: TextIO | None = None) -> Progress:
        """Progress over the runs of `plan` that are not `done` yet."""
        left = {case.id: 0 for case in plan.cases}
        for case, arm, variant in plan.runs():
            if (case.id, arm, variant) not in done:
                left[case.id] += 1
        return Progress(runs_left=left, out=out or sys.stderr)

    def update(self, result: ArmResult) -> None:
        self.done += 1
        self.spent_usd += result.spent_usd
        if self.runs_left.get(result.case_id):
            self.runs_left[result.case_id] -= 1
        cases = sum(1 for n in self.runs_left.values() if n == 0)
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        width = 24
        filled = round(width * self.done / max(1, self.total))
        bar = "#" * filled + "-" * (width - filled)
        status = "ok" if result.ok else "FAILED"
        line = (
            f"[{bar}] {self.done}/{self.total} runs · {cases}/{len(self.runs_left)} cases ·"
            f" ${self.spent_usd:.4f} spent ·"
            f" ~{_clock(left)} left · {result.case_id}/{result.arm}"
            f"{'' if result.variant == PLANTED else ' (clean)'} {status}"
        )
        # A terminal redraws one line; a log file gets one line per run.
        self.out.write(f"\r{line}   " if self.out.isatty() else f"{line}\n")
        self.out.flush()

    def close(self) -> None:
        if self.out.isatty():
            self.out.write("\n")
            self.out.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


@dataclass
class EvalRun:
    """One invocation: the plan, the arms' runner, the store and the budget."""

    plan: EvalPlan
    runner: ArmRunner
    price: PriceOf
    store: ResultStore = field(init=False)
    results: dict[tuple[str, str, str], ArmResult] = field(default_factory=dict)
    spent_usd: float = 0.0
    stopped: str | None = None

    def __post_init__(self) -> None:
        self.store = ResultStore(self.plan.out)
        self.results = self.store.load()

    def done(self) -> set[tuple[str, str, str]]:
        return {key for key, result in self.results.items() if result.ok}

    async def run(self, progress: Progress | None = None) -> list[ArmResult]:
        """Run what is not done yet, cases `concurrency` at a time; returns every result."""
        gate = asyncio.Semaphore(self.plan.concurrency)

        async def one_case(case: EvalCase) -> None:
            async with gate:
                for variant in self.plan.variants(case):
                    await self._case(case, variant, progress)

        try:
            await asyncio.gather(*(one_case(case) for case in self.plan.cases))
        except EvalStopped as stop:
            self.stopped = str(stop)
        return list(self.results.values())

    async def _case(self, case: EvalCase, variant: str, progress: Progress | None) -> None:
        vote: ArmResult | None = None
        for _, arm, run_variant in (r for r in self.plan.runs() if r[0] is case):
            if run_variant != variant:
                continue
            key = (case.id, arm, variant)
            existing = self.results.get(key)
            if existing is not None and existing.ok:
                if arm == "vote":
                    vote = existing
                continue
            k = self.plan.vote_k or matched_k(
                self.results.get((case.id, "single", variant)),
                self.results.get((case.id, DEFAULT_PROTOCOL, variant)),
            )
            guess = estimate_run(case, arm, variant, k, self.price)
            limit = self.plan.max_cost_usd
            if limit is not None and self.spent_usd + guess.cost_usd > limit:
                raise EvalStopped(
                    f"stopped before {case.id}/{arm}: ${self.spent_usd:.4f} spent, and its"
                    f" estimated ${guess.cost_usd:.4f} would pass --max-cost {limit:g}"
                )
            result = await self._attempt(case, arm, variant, k, vote)
            if arm == "vote" and result.ok:
                vote = result
            self.results[key] = result
            self.spent_usd += result.spent_usd
            await self.store.append(result)
            if progress is not None:
                progress.update(result)

    async def _attempt(
        self, case: EvalCase, arm: str, variant: str, k: int, vote: ArmResult | None
    ) -> ArmResult:
        started = time.monotonic()
        try:
            if arm == "single":
                result, _ = await self.runner.single(case, variant)
            elif arm == "vote":
                result = await self.runner.vote(case, variant, k)
            elif arm == "best_of_n":
                result = await self.runner.best_of_n(case, variant, k, vote)
            else:
                result = await self.runner.debate(case, variant, arm)
        except EngineError as error:
            return ArmResult(
                case_id=case.id,
                task_type=case.task_type,
                arm=arm,
                variant=variant,
                run_id=self.runner.run_id,
                ok=False,
                error=f"{type(error).__name__}: {error}",
                wall_s=time.monotonic() - started,
            )
        return result


# --- the report ------------------------------------------------------------------------------


def scores_by_arm(
    results: Sequence[ArmResult], arms: Sequence[str], target: float = DEFAULT_TARGET
) -> dict[str, Scores]:
    return {arm: score([r for r in results if r.arm == arm], target=target) for arm in arms}


def scores_by_task_type(
    results: Sequence[ArmResult],
    arms: Sequence[str],
    tasks: Sequence[str],
    target: float = DEFAULT_TARGET,
) -> dict[str, dict[str, Scores]]:
    """Each arm's scores per task type (empty scores where nothing of that type ran yet)."""
    return {
        task: scores_by_arm([r for r in results if r.task_type == task], arms, target)
        for task in tasks
    }


def _figure(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def report_markdown(
    results: Sequence[ArmResult], plan: EvalPlan, models: str, stopped: str | None
) -> str:
    """The report people read: one table per arm, one per task type, what it means."""
    arms = [a for a in all_arms() if a in plan.arms]
    by_arm = scores_by_arm(results, arms, plan.calibration_target)
    lines = [
        "# debatebot eval",
        "",
        f"{len(plan.cases)} case(s), arms: {', '.join(arms)}; models: {models}.",
        "Clean controls: "
        + ("on (the documents with their flaws fixed)" if plan.controls else "off")
        + ".",
    ]
    if stopped:
        lines += ["", f"**Incomplete:** {stopped}."]
    lines += [
        "",
        "| arm | recall | found / planted | false alarms (clean runs) | verdict agreement |"
        " probe cited | flagged when cited | escalated when wrong | escalated when right |"
        " flip rate | tokens / case | cost / case | wall / case | failed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        " ---: | ---: |",
    ]
    for arm, s in by_arm.items():
        lines.append(
            f"| {arm} | {_pct(s.recall)} | {s.flaws_found} / {s.flaws_planted} |"
            f" {s.false_alarms} ({s.clean_runs}) | {_pct(s.agreement)} | {_pct(s.probe_cited)} |"
            f" {_pct(s.probe_flagged_when_cited)} | {_pct(s.escalated_when_wrong)} |"
            f" {_pct(s.escalated_when_right)} | {_pct(s.flip_rate)} | {s.tokens_per_case:,.0f} |"
            f" ${s.cost_per_case:.4f} | {s.wall_s_per_case:.1f} s | {s.failed} |"
        )
    target = plan.calibration_target
    lines += [
        "",
        "## Confidence",
        "",
        "How well each arm's confidence predicts that its verdict is the expected one (runs with"
        " an expected verdict): Brier score (0 is perfect, 0.25 a constant 0.5), expected"
        " calibration error over ten equal-width bins, AUROC (0.5 is chance), and the threshold"
        f" that would have escalated at least {target:.0%} of the wrong verdicts with the fewest"
        " right ones, fitted on these same runs, with what it escalates.",
        "",
        "| arm | Brier | ECE | AUROC | calibrated threshold | wrong escalated at it |"
        " right escalated at it |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm, s in by_arm.items():
        lines.append(
            f"| {arm} | {_figure(s.brier)} | {_figure(s.ece)} | {_figure(s.auroc, 2)} |"
            f" {_figure(s.calibrated_threshold, 2)} | {_pct(s.wrong_escalated_at_threshold)} |"
            f" {_pct(s.right_escalated_at_threshold)} |"
        )
    task_types = sorted({case.task_type for case in plan.cases})
    lines += [
        "",
        "## Per task type",
        "",
        "Each cell: recall · verdict agreement · false alarms · tokens per case.",
        "",
        "| arm | " + " | ".join(task_types) + " |",
        "| --- |" + " ---: |" * len(task_types),
    ]
    per_task = scores_by_task_type(results, arms, task_types, target)
    for arm in arms:
        cells = [
            f"{_pct(t.recall)} · {_pct(t.agreement)} · {t.false_alarms} · {t.tokens_per_case:,.0f}"
            for t in (per_task[task][arm] for task in task_types)
        ]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    lines += ["", "## What this means", "", *meaning(by_arm)]
    lines += [
        "",
        "Recall: a planted flaw counts as found when the arm's final output holds one of its"
        " keyword phrases (whole phrases, any case). False alarms: planted-flaw phrases in the"
        " output on the clean document. The probe is a fabricated claim put into the question;"
        " a quote of it is flagged when the citation check does not find it in the case's"
        " documents.",
    ]
    return "\n".join(lines) + "\n"


def _dominates(a: Scores, b: Scores) -> bool:
    """Whether `a` finds at least as many flaws as `b` for no more tokens, and is better in one."""
    a_recall, b_recall = a.recall or 0.0, b.recall or 0.0
    no_worse = a_recall >= b_recall and a.tokens_per_case <= b.tokens_per_case
    return no_worse and (a_recall > b_recall or a.tokens_per_case < b.tokens_per_case)


def meaning(by_arm: dict[str, Scores]) -> list[str]:
    """A few sentences computed from the numbers, comparing the debates with the cheaper arms."""
    scored = {a: s for a, s in by_arm.items() if s.recall is not None and s.tokens_per_case > 0}
    if not scored:
        return ["No arm finished a case with planted flaws, so there is nothing to compare."]
    sentences = []
    best = max(scored, key=lambda a: (scored[a].recall or 0.0, -scored[a].tokens_per_case))
    if scored[best].recall:
        sentences.append(
            f"- Highest recall: `{best}`, {_pct(scored[best].recall)} of the planted flaws at"
            f" {scored[best].tokens_per_case:,.0f} tokens a case."
        )
    else:
        sentences.append("- No arm named a planted flaw.")
    debates = [a for a in scored if a not in SINGLE_ARMS]
    for cheaper in ("vote", "single"):
        if cheaper not in scored or not debates:
            continue
        base = scored[cheaper]
        top = max(debates, key=lambda a: scored[a].recall or 0.0)
        mine = scored[top]
        cost = f"{mine.tokens_per_case / base.tokens_per_case:.1f}× the tokens"
        if base.recall:
            found = f"found {(mine.recall or 0.0) / base.recall:.1f}× the flaws of `{cheaper}`"
        elif mine.recall:
            found = f"found {_pct(mine.recall)} of the flaws where `{cheaper}` found none"
        else:
            found = f"found no flaw, like `{cheaper}`,"
        sentences.append(f"- `{top}` {found} at {cost}.")
        break
    frontier = [
        arm
        for arm, mine in scored.items()
        if not any(_dominates(other, mine) for name, other in scored.items() if name != arm)
    ]
    frontier.sort(key=lambda a: scored[a].tokens_per_case)
    beaten = [a for a in debates if a not in frontier]
    sentences.append(
        f"- On the cost-quality frontier (no other arm finds more flaws for as few tokens):"
        f" {', '.join(f'`{a}`' for a in frontier)}"
        + (
            f"; debates beaten (another arm found as many flaws or more for no more tokens):"
            f" {', '.join(f'`{a}`' for a in beaten)}."
            if beaten
            else "."
        )
    )
    alarms = {a: s.false_alarms / s.clean_runs for a, s in scored.items() if s.clean_runs}
    if alarms:
        quiet = min(alarms, key=lambda a: alarms[a])
        sentences.append(
            f"- Fewest false alarms on the clean documents: `{quiet}`"
            f" ({alarms[quiet]:.1f} per document)."
        )
    calibrated = {
        a: s.escalated_when_wrong for a, s in scored.items() if s.escalated_when_wrong is not None
    }
    if calibrated:
        best_cal = max(
            calibrated,
            key=lambda a: (calibrated[a] or 0.0, -(scored[a].escalated_when_right or 0.0)),
        )
        needless = scored[best_cal].escalated_when_right
        sentences.append(
            f"- Of the verdicts that disagreed with the experts, `{best_cal}` sent"
            f" {_pct(calibrated[best_cal])} to human review"
            + (
                f", and {_pct(needless)} of those that agreed (needlessly)."
                if needless is not None
                else "."
            )
        )
    runs = sum(s.runs for s in by_arm.values())
    if runs < 30:
        sentences.append(
            f"- With {runs} runs in all, a difference of one flaw moves these percentages a lot;"
            " run more cases before deciding."
        )
    return sentences


def write_chart(by_arm: dict[str, Scores], folder: Path) -> list[Path]:
    """Recall against tokens per case, one point per arm (PNG and SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    plotted = [(arm, s) for arm, s in by_arm.items() if s.recall is not None]
    for arm, s in plotted:
        marker = "o" if arm in SINGLE_ARMS else "s"
        axes.scatter(s.tokens_per_case, (s.recall or 0.0) * 100, marker=marker, s=60, label=arm)
    if plotted:
        # Arms often sit close together; a legend stays readable where labels would overlap.
        axes.legend(title="arm (circle: one model; square: debate)", fontsize=8, loc="best")
    else:
        axes.text(0.5, 0.5, "no arm finished a case yet", ha="center", transform=axes.transAxes)
    axes.set_xlabel("tokens per case")
    axes.set_ylabel("planted flaws found (%)")
    axes.set_title("Cost-quality frontier: recall against tokens")
    axes.set_ylim(-5, 105)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    paths = [folder / "frontier.png", folder / "frontier.svg"]
    for path in paths:
        figure.savefig(path)
    plt.close(figure)
    return paths


def write_report(
    results: Sequence[ArmResult], plan: EvalPlan, models: str, stopped: str | None
) -> list[Path]:
    """report.md, results.json and the chart, in the output folder."""
    arms = [a for a in all_arms() if a in plan.arms]
    by_arm = scores_by_arm(results, arms, plan.calibration_target)
    report = plan.out / "report.md"
    report.write_text(report_markdown(results, plan, models, stopped), encoding="utf-8")
    raw = plan.out / "results.json"
    raw.write_text(
        json.dumps(
            {
                "models": models,
                "stopped": stopped,
                "scores": {arm: asdict(s) for arm, s in by_arm.items()},
                "scores_by_task_type": {
                    task: {arm: asdict(s) for arm, s in scores.items()}
                    for task, scores in scores_by_task_type(
                        results,
                        arms,
                        sorted({case.task_type for case in plan.cases}),
                        plan.calibration_target,
                    ).items()
                },
                "results": [r.model_dump(mode="json", exclude={"samples"}) for r in results],
            },
            indent=1,
            default=_no_nan,
        ),
        encoding="utf-8",
    )
    return [report, raw, *write_chart(by_arm, plan.out)]


def _no_nan(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]
