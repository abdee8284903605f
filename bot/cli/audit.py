"""`debatebot audit` and `debatebot export`: check, sign and export debates' records."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli.keys import check_receipt
from bot.settings import Settings
from bot.store import queue, verify
from bot.store.audit import CHAIN_VERSION, ChainReport
from bot.store.db import session_scope
from bot.store.export import export_record, render_markdown, verify_export
from bot.store.tenancy import scope_for
from bot.wiring import (
    open_store,
)

if TYPE_CHECKING:
    from sqlmodel import Session


def audit(args: argparse.Namespace) -> int:
    settings = Settings()
    key = settings.audit_key_bytes()
    if args.action == "verify-export":
        if args.target is None:
            print("debatebot: audit verify-export takes an export file", file=sys.stderr)
            return 2
        checked = _verified_export(args.target, key)
        if isinstance(checked, str):
            print(f"debatebot: {checked}", file=sys.stderr)
            return 1
        report, record = checked
        return print_audit(report) | check_receipt(record, args.keys, settings)
    debate_id: int | None = None
    if args.target is not None:
        try:
            debate_id = int(args.target)
        except ValueError:
            print(
                f"debatebot: audit {args.action} takes a debate id; got {args.target!r}",
                file=sys.stderr,
            )
            return 2
    if args.action in ("sign", "reseal") and key is None:
        print(
            f"debatebot: audit {args.action} needs DEBATEBOT_AUDIT_KEY, the key the bot signs"
            " seals with",
            file=sys.stderr,
        )
        return 2
    with (
        open_store(settings) as engine,
        session_scope(engine, workspace=scope_for(args.team)) as session,
    ):
        if args.action == "sign":
            assert key is not None
            return _sign(session, debate_id, key)
        if args.action == "reseal":
            assert key is not None
            return _reseal(session, debate_id, key)
        if debate_id is not None:
            return print_audit(verify.verify_chain(session, debate_id=debate_id, key=key))
        ids = queue.debate_ids(session)
        failed = [
            report
            for report in (verify.verify_chain(session, debate_id=i, key=key) for i in ids)
            if print_audit(report)
        ]
    if failed:
        named = ", ".join(f"debate {report.debate_id} ({report.kind})" for report in failed)
        print(f"{len(failed)} of {len(ids)} debates failed: {named}", file=sys.stderr)
        return 1
    print(f"every debate verified ({len(ids)})")
    return 0


EXPORT_PARTS = ("debate", "spec", "turn_rows", "verdict_row")
WRITES_EXPORTS = "`debatebot export ID --out FILE` and `debatebot run --json FILE` write one"


def _verified_export(target: str, key: bytes | None) -> tuple[ChainReport, dict[str, Any]] | str:
    """What verifying the export file `target` found, with the export itself, or a sentence
    saying why it is not an export that can be verified."""
    try:
        text = Path(target).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return f"cannot read {target}: {getattr(error, 'strerror', None) or error}"
    try:
        record = json.loads(text)
    except ValueError as error:
        return f"{target} is not JSON ({error}), so not a debatebot export; {WRITES_EXPORTS}"
    missing = (
        [part for part in EXPORT_PARTS if part not in record]
        if isinstance(record, dict)
        else list(EXPORT_PARTS)
    )
    if missing:
        return (
            f"{target} is not a debatebot export: it has no {', '.join(missing)}"
            f" part{'s' * (len(missing) > 1)}; {WRITES_EXPORTS}"
        )
    try:
        return verify_export(record, key=key), record
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        problem = f"it has no {error}" if isinstance(error, KeyError) else str(error)
        return (
            f"{target} is not a whole debatebot export ({problem}); export the debate again:"
            f" {WRITES_EXPORTS}"
        )


def _sign(session: Session, debate_id: int | None, key: bytes) -> int:
    """`audit sign`: sign every intact unsigned seal (of `debate_id`, or of every finished
    debate) and seal the debates that finished before seals; 1 when one does not verify."""
    ids = [debate_id] if debate_id is not None else queue.debate_ids(session, finished=True)
    refused = 0
    for each in ids:
        done, report = verify.sign_seal(session, debate_id=each, key=key)
        if done == "signed":
            print(f"debate {each}: signed its v{report.version} seal (head {report.head})")
        elif done == "sealed":
            print(f"debate {each}: finished before audit seals; sealed and signed as it stands")
        elif not report.ok:
            refused += 1
            print(
                f"debate {each}: not signed: {(report.kind or '').upper()}: {report.problem}",
                file=sys.stderr,
            )
    if refused:
        print(f"{refused} debates do not verify and were not signed", file=sys.stderr)
    return 1 if refused else 0


def _reseal(session: Session, debate_id: int | None, key: bytes) -> int:
    """`audit reseal`: re-seal every v2 seal that verifies whole, its signature included (of
    `debate_id`, or of every finished debate), as v3, which covers the workspace it stands in;
    1 when a v2 seal does not verify (it is left as it is)."""
    ids = [debate_id] if debate_id is not None else queue.debate_ids(session, finished=True)
    refused = 0
    for each in ids:
        report = verify.upgrade_seal(session, debate_id=each, key=key)
        if report is not None:
            print(
                f"debate {each}: re-sealed its v2 seal as v{report.version}, which covers the"
                f" workspace it belongs to (head {report.head})"
            )
            continue
        found = verify.verify_chain(session, debate_id=each, key=key)
        if found.version == 2 and not (found.ok and found.signature == "valid"):
            refused += 1
            print(
                f"debate {each}: not re-sealed: its v2 seal does not verify with the key"
                f" ({(found.kind or '').upper()}: {found.problem})",
                file=sys.stderr,
            )
    if refused:
        print(f"{refused} v2 seals do not verify and were not re-sealed", file=sys.stderr)
    return 1 if refused else 0


def print_audit(report: ChainReport) -> int:
    """Say what verifying found; 0 when nothing is wrong, 1 when something is."""
    where = f"debate {report.debate_id}"
    if not report.ok:
        print(
            f"{where}: {report.kind.upper() if report.kind else 'BROKEN'}: {report.problem}",
            file=sys.stderr,
        )
        return 1
    note = f". Note: {report.note}" if report.note else ""
    if report.sealed:
        covered = (
            " and the verdict"
            if report.version == 1
            else ", the verdict, and the debate's question, spec, ending and workspace"
            if report.version == CHAIN_VERSION
            else ", the verdict, and the debate's question, spec and ending"
        )
        print(
            f"{where}: verified ({report.turns_checked} turns{covered}; v{report.version} seal,"
            f" head {(report.head or '')[:12]}); signature {report.signature}{note}"
        )
    elif report.note:
        print(
            f"{where}: turn chain verified ({report.turns_checked} turns); signature"
            f" {report.signature}{note}"
        )
    else:
        print(f"{where}: turn chain verified ({report.turns_checked} turns); not sealed yet")
    return 0


def export(args: argparse.Namespace) -> int:
    settings = Settings()
    with (
        open_store(settings) as engine,
        session_scope(engine, workspace=scope_for(args.team)) as session,
    ):
        record = export_record(session, debate_id=args.debate_id, key=settings.audit_key_bytes())
    if args.format == "receipt" and record["receipt"] is None:
        print(f"debatebot: debate {args.debate_id} has no receipt", file=sys.stderr)
        return 1
    text = (
        json.dumps(record["receipt"], indent=2, ensure_ascii=False)
        if args.format == "receipt"
        else json.dumps(record, indent=2, ensure_ascii=False)
        if args.format == "json"
        else render_markdown(record)
    )
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"debate {args.debate_id} exported to {args.out}")
    else:
        sys.stdout.write(text)
    return 0
