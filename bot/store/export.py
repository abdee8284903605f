"""Export one debate whole: JSON for programs, Markdown for people (a risk officer, a reviewer)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session

from bot.store import endings, queue, receipts, reviews, turns
from bot.store.audit import KEY_DEPENDENT_KINDS, PRE_SEAL_VERSION, ChainReport, audit
from bot.store.debate_tables import Debate, Turn, VerdictRecord
from bot.store.results import StoredResult
from engine.models import TurnRecord


def export_record(session: Session, *, debate_id: int, key: bytes | None = None) -> dict[str, Any]:
    """The debate's job record, its result (transcript from the turn rows), reviews, the audit
    chain whole (the turn rows with their hashes, the verdict row and its seal) and the signed
    receipt, so the file can be verified offline (`debatebot audit verify-export`, and without
    debatebot `tools/verify_receipt.py`)."""
    debate = queue.get_debate(session, debate_id=debate_id)
    verdict = endings.verdict_for(session, debate_id=debate_id)
    rows = turns.turn_rows(session, debate_id=debate_id)
    escalation = reviews.escalation_for(session, debate_id=debate_id)
    chain = audit(debate, rows, verdict, key=key)
    transcript = [turns.turn_record(row) for row in rows]
    return {
        "debate": debate.model_dump(mode="json", exclude={"spec_json"}),
        "spec": json.loads(debate.spec_json),
        "result": _result(verdict, transcript),
        "turns": [turn.model_dump(mode="json") for turn in transcript],
        "escalation": escalation.model_dump(mode="json") if escalation else None,
        "reviews": [
            review.model_dump(mode="json")
            for review in reviews.reviews_for(session, debate_id=debate_id)
        ],
        "audit": {
            "chain_ok": chain.ok,
            "turns_checked": chain.turns_checked,
            "first_broken_seq": chain.first_broken_seq,
            "problem": chain.problem,
            "kind": chain.kind,
            "head": chain.head,
            "version": chain.version,
            "note": chain.note,
            "signature": verdict.chain_signature if verdict else None,
            "signature_check": chain.signature,
        },
        "turn_rows": [row.model_dump(mode="json") for row in rows],
        "verdict_row": verdict.model_dump(mode="json") if verdict else None,
        "receipt": receipts.receipt_of(session, debate_id=debate_id),
    }


def _result(verdict: VerdictRecord | None, transcript: list[TurnRecord]) -> dict[str, Any] | None:
    """The debate's result as people read it: the verdict row's result document with the
    transcript of the turn rows."""
    return None if verdict is None else StoredResult.shown(verdict.result_json, transcript)


def verify_export(record: dict[str, Any], *, key: bytes | None) -> ChainReport:
    """Check an exported record offline: its turn chain, verdict, seal and (with `key`)
    signature, then that what people read in it (the debate's question, the spec, the result,
    the transcript, the audit summary) is what those sealed rows give."""
    rows = _rows(record)
    if isinstance(rows, str):
        found = record["debate"].get("id")
        return ChainReport(found if isinstance(found, int) else 0, 0, None, rows, "edited_export")
    debate, turns, verdict = rows
    report = audit(debate, turns, verdict, key=key)
    if not report.ok:
        return report
    edit = _edited(record, debate, turns, verdict, report)
    return report if edit is None else replace(report, kind="edited_export", problem=edit)


def _rows(record: dict[str, Any]) -> tuple[Debate, list[Turn], VerdictRecord | None] | str:
    """The export's debate, turn and verdict rows, or which of them no store could hold."""
    part = "debate"
    try:
        debate = Debate.model_validate(
            {**record["debate"], "spec_json": json.dumps(record["spec"])}
        )
        part = "turn_rows"
        turns = [Turn.model_validate(row) for row in record.get("turn_rows") or []]
        part = "verdict_row"
        verdict = record.get("verdict_row")
        if verdict and "chain_version" not in verdict:
            # Exported before schema 0012: versioned as migration 0012 versions stored rows.
            unsealed = all(verdict.get(name) is None for name in _V1_SEAL)
            verdict = {**verdict, "chain_version": PRE_SEAL_VERSION if unsealed else 1}
        return debate, turns, VerdictRecord.model_validate(verdict) if verdict else None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return f"{part} is not a row the store could hold ({where}: {first['msg']})"


_V1_SEAL = ("chain_turns", "chain_tail", "chain_head", "chain_signature")


def _edited(
    record: dict[str, Any],
    debate: Debate,
    rows: list[Turn],
    verdict: VerdictRecord | None,
    report: ChainReport,
) -> str | None:
    """Which human-readable part of a verified export differs from its sealed rows, if any."""
    transcript = [turns.turn_record(row) for row in rows]
    spec = record["spec"]
    if not isinstance(spec, dict) or spec.get("question") != debate.question:
        return "debate.question differs from the question in the spec"
    expected: dict[str, Any] = {
        "turns": [turn.model_dump(mode="json") for turn in transcript],
        "result": _result(verdict, transcript),
    }
    for part, value in expected.items():
        where = _difference(json.loads(json.dumps(value)), record.get(part), part)
        if where is not None:
            source = (
                "the sealed verdict"
                if part == "result" and not where.startswith("result.transcript")
                else "the sealed turn rows"
            )
            return f"{where} differs from {source}"
    summary = record.get("audit") or {}
    # Exports made before schema 0012 have no version or note in their summary.
    sealed_summary = {
        "turns_checked": report.turns_checked,
        "first_broken_seq": None,
        "head": report.head,
        "version": report.version,
        "note": report.note,
        "signature": verdict.chain_signature if verdict else None,
    }
    if report.version == 2 and summary.get("note") is None:
        # Exported before schema 0021, when a v2 seal carried no note about the workspace.
        sealed_summary["note"] = None
    for name, value in sealed_summary.items():
        if (name in summary or name not in ("version", "note")) and summary.get(name) != value:
            return f"audit.{name} differs from the sealed rows"
    if summary.get("chain_ok") is True and (summary.get("kind") or summary.get("problem")):
        return "audit.chain_ok says verified beside a problem"
    if summary.get("chain_ok") is not True and summary.get("kind") not in KEY_DEPENDENT_KINDS:
        return "audit.chain_ok says the chain is broken but the sealed rows verify"
    return None


def _difference(expected: Any, found: Any, path: str) -> str | None:
    """The path of the first place `found` differs from `expected` (JSON values), if any."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for name in sorted(expected.keys() | found.keys()):
            if name not in expected or name not in found:
                return f"{path}.{name}"
            where = _difference(expected[name], found[name], f"{path}.{name}")
            if where is not None:
                return where
        return None
    if isinstance(expected, list) and isinstance(found, list):
        if len(expected) != len(found):
            return f"{path} ({len(found)} items where the rows give {len(expected)})"
        for index, (left, right) in enumerate(zip(expected, found, strict=True)):
            where = _difference(left, right, f"{path}[{index}]")
            if where is not None:
                return where
        return None
    same = type(expected) is type(found) and expected == found
    return None if same else path


def _list(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- (none)"


def _confidence(verdict: dict[str, Any], judgments: list[dict[str, Any]]) -> list[str]:
    """What the confidence is made of: every component with its value, weight and share of the
    logit, and each independent judge's decision (nothing for a verdict scored before
    components were kept)."""
    components = verdict.get("components")
    if not components:
        return []
    notes = components.get("notes") or {}
    line = " \u00b7 ".join(notes[name] for name in components["values"] if notes.get(name))
    lines = [
        f"Confidence made of: {line or '(no notes)'}",
        "",
        f"| component (weights {verdict['weights_version']}) | value | counted as | weight"
        " | adds to the logit | measured |",
        "|---|---|---|---|---|---|",
    ]
    for row in verdict.get("contributions") or []:
        value = "not measured" if row["value"] is None else f"{row['value']:.2f}"
        lines.append(
            f"| {row['component']} | {value} | {row['used']:.2f} | {row['weight']:+.2f} |"
            f" {row['logit']:+.2f} | {notes.get(row['component'], '')} |"
        )
    lines.append("")
    for judge in judgments:
        said = judge["decision"] or f"no decision ({judge['error']})"
        agrees = {True: ", agrees", False: ", disagrees", None: ""}[judge["agrees"]]
        lines.append(
            f"- Independent judge {judge['judge']} on {judge['provider']}:{judge['model']}"
            f" (sides swapped: {'yes' if judge['swapped'] else 'no'}): {said}{agrees}"
        )
    return [*lines, ""] if judgments else lines


def _receipt_line(receipt: dict[str, Any] | None) -> str:
    """Who signed the receipt and how to check it."""
    if receipt is None:
        return "none (made before receipts, or not finished)"
    signature = receipt["signature"]
    signed = f"signed with key `{signature['key_id']}`" if signature else "UNSIGNED"
    return (
        f"{signed}, {len(receipt['decisions'])} decision(s); check the JSON export with"
        " `python tools/verify_receipt.py FILE --keys KEYS.json`"
    )


def render_markdown(record: dict[str, Any]) -> str:
    """A readable report of an exported record."""
    debate = record["debate"]
    lines = [
        f"# Debate {debate['id']}: {debate['question']}",
        "",
        f"- State: {debate['state']} · outcome: {debate['outcome'] or 'n/a'}",
        f"- Protocol: {debate['protocol']} · trigger: `{debate['trigger_key']}`",
        f"- Requested: {debate['created_at']} · finished: {debate['finished_at'] or 'n/a'}",
        f"- Cost: ${debate['cost_usd']:.4f}",
        f"- Audit chain: {'verified' if record['audit']['chain_ok'] else 'BROKEN'}"
        f" ({record['audit']['turns_checked']} turns checked)"
        + (f": {record['audit']['problem']}" if record["audit"]["problem"] else ""),
        f"- Audit seal: head `{record['audit']['head'] or 'none (not finished)'}`,"
        f" signature {record['audit']['signature_check']}"
        + (f" ({record['audit']['note']})" if record["audit"].get("note") else ""),
        f"- Receipt: {_receipt_line(record.get('receipt'))}",
        "",
    ]
    result = record["result"]
    if result is not None:
        verdict = result["verdict"]
        lines += [
            "## Verdict",
            "",
            f"**{verdict['decision']}** · status {verdict['status']} · confidence"
            f" {verdict['confidence']:.2f} ({verdict['level']})",
            "",
            verdict["synthesis"],
            "",
            *_confidence(verdict, result.get("judgments") or []),
            "Confidence method:",
            _list([f"{s['delta']:+.2f} {s['reason']}" for s in verdict["confidence_method"]]),
            "",
            "Unresolved points:",
            _list(verdict["unresolved_points"]),
            "",
            "Uncertainties:",
            _list(verdict["uncertainties"]),
            "",
            "Escalation: "
            + ("; ".join(verdict["escalation_reasons"]) if verdict["escalate"] else "not needed"),
            "",
        ]
        if result["proposition"]:
            lines += ["## Proposition", "", result["proposition"]["thesis"], ""]
        flagged = [c for c in result["citations"] if not c["verified"]]
        if flagged:
            lines += ["## Unverified citations", ""]
            lines += [f"- {c['role']} round {c['round']}: “{c['quote']}”" for c in flagged]
            lines.append("")
    lines += ["## Turns", "", "| # | round | role | attempt | model | tokens in/out | cost |"]
    lines.append("|---|---|---|---|---|---|---|")
    for index, turn in enumerate(record["turns"]):
        lines.append(
            f"| {index} | {turn['round']} | {turn['role']} | {turn['attempt']} |"
            f" {turn['provider']}:{turn['model']} | {turn['usage']['input_tokens']}/"
            f"{turn['usage']['output_tokens']} | ${turn['cost_usd']:.4f} |"
        )
    lines.append("")
    for index, turn in enumerate(record["turns"]):
        lines += [
            f"### {index}. {turn['role']} (round {turn['round']}, attempt {turn['attempt']})",
            "",
            f"prompt sha256 `{turn['prompt_sha256'][:16]}`",
            "",
            "```json",
            json.dumps(turn["parsed"], indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    if record["reviews"]:
        lines += ["## Reviews", ""]
        lines += [
            f"- {r['created_at']}: {r['reviewer']} {r['decision']}"
            + (f": {r['note']}" if r["note"] else "")
            for r in record["reviews"]
        ]
    return "\n".join(lines) + "\n"
