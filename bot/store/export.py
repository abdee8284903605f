"""Export one debate whole: JSON for programs, Markdown for people (a risk officer, a reviewer)."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session

from bot.store import repository
from bot.store.audit import ChainReport, audit
from bot.store.tables import Turn, VerdictRecord
from engine.models import DebateResult


def export_record(session: Session, *, debate_id: int, key: bytes | None = None) -> dict[str, Any]:
    """The debate's job record, its result (transcript from the turn rows), reviews, and the
    audit chain whole: the turn rows with their hashes, the verdict row and its seal, so the
    file can be verified offline (`debatebot audit verify-export`)."""
    debate = repository.get_debate(session, debate_id=debate_id)
    verdict = repository.verdict_for(session, debate_id=debate_id)
    transcript = repository.stored_turns(session, debate_id=debate_id)
    result: dict[str, Any] | None = None
    if verdict is not None:
        parsed = DebateResult.model_validate_json(verdict.result_json)
        parsed.transcript = transcript
        result = parsed.model_dump(mode="json")
    escalation = repository.escalation_for(session, debate_id=debate_id)
    chain = repository.verify_chain(session, debate_id=debate_id, key=key)
    return {
        "debate": debate.model_dump(mode="json", exclude={"spec_json"}),
        "spec": json.loads(debate.spec_json),
        "result": result,
        "turns": [turn.model_dump(mode="json") for turn in transcript],
        "escalation": escalation.model_dump(mode="json") if escalation else None,
        "reviews": [
            review.model_dump(mode="json")
            for review in repository.reviews_for(session, debate_id=debate_id)
        ],
        "audit": {
            "chain_ok": chain.ok,
            "turns_checked": chain.turns_checked,
            "first_broken_seq": chain.first_broken_seq,
            "problem": chain.problem,
            "kind": chain.kind,
            "head": chain.head,
            "signature": verdict.chain_signature if verdict else None,
            "signature_check": chain.signature,
        },
        "turn_rows": [
            row.model_dump(mode="json")
            for row in repository.turn_rows(session, debate_id=debate_id)
        ],
        "verdict_row": verdict.model_dump(mode="json") if verdict else None,
    }


def verify_export(record: dict[str, Any], *, key: bytes | None) -> ChainReport:
    """Check an exported record offline: its turn chain, seal and (with `key`) signature."""
    debate = record["debate"]
    rows = [Turn.model_validate(row) for row in record.get("turn_rows") or []]
    verdict = record.get("verdict_row")
    return audit(
        int(debate["id"]),
        rows,
        VerdictRecord.model_validate(verdict) if verdict else None,
        key=key,
        debate_seal=(debate.get("chain_head"), debate.get("chain_turns")),
    )


def _list(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- (none)"


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
        f" signature {record['audit']['signature_check']}",
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
