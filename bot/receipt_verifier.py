#!/usr/bin/env python3
"""Verify a debatebot decision receipt offline, with nothing but Python 3.11 and `cryptography`.

    python verify_receipt.py RECEIPT_OR_EXPORT --keys KEYS.json

A receipt (RFC 8785 canonical JSON, signed with Ed25519 under a key id) holds digests of what
a finished debate read, said and decided; each human decision on it is a signed statement that
joins it (docs/audit.md lists the fields). The public keys file (`debatebot keys list --public
--json`, or `/.well-known/debatebot-keys.json`) lists each key with its validity period and is
signed by the deployment's current key. Given an export (`debatebot export ID`), the export's
question, documents, spec, transcript, verdict, result, workspace and reviews are checked
against the receipt's digests too, and its turn and verdict rows against what it shows. This
file is the one copy of the checks: `bot.receipt_verifier`, run by `audit verify-export`, and
`tools/verify_receipt.py`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

RECEIPT_FORMAT = "debatebot-receipt/1"
DECISION_FORMAT = "debatebot-decision/1"
KEYS_FORMAT = "debatebot-keys/1"
ALGORITHM = "Ed25519"
PENDING_TEAM = "pending"
"""The workspace of a debate run before the deployment learnt its Slack workspace's id."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest receipt, export or keys file read: far above a debate's (a few MB at most)."""


class CanonicalError(ValueError):
    """A value outside JSON's I-JSON subset, which RFC 8785 cannot canonicalize."""


_SAFE_INTEGER = 2**53
_SURROGATE = re.compile("[\ud800-\udfff]")


def canonical(value: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value (dicts, lists, str, int, float, bool, None):
    no whitespace, object members sorted by the UTF-16 code units of their names, strings
    escaped as ECMAScript's JSON.stringify does, numbers written as ECMAScript writes a double."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts).encode("utf-8")


def _write(value: Any, out: list[str]) -> None:
    # The commonest kinds first: a debate's receipt walks some 10^3 values.
    if isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, Mapping):
        names = list(value)
        if not all(isinstance(name, str) for name in names):
            raise CanonicalError("an object member name is not a string")
        # Code points sort as UTF-16 code units do unless a name holds one past U+FFFF.
        order = sorted(names) if "".join(names).isascii() else sorted(names, key=_utf16)
        out.append("{")
        for index, name in enumerate(order):
            out.append(f"{',' if index else ''}{_string(name)}:")
            _write(value[name], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        if abs(value) > _SAFE_INTEGER:
            raise CanonicalError(f"the integer {value} is beyond what a JSON number holds exactly")
        # An integral double below 10^21 is written as its digits (RFC 8785 section 3.2.2.3).
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(number(value))
    else:
        raise CanonicalError(f"a {type(value).__name__} is not a JSON value")


def _utf16(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare as the code units do (RFC 8785 section 3.2.3).
    return name.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    """A JSON string as ECMAScript's JSON.stringify writes it (RFC 8785 section 3.2.2.2):
    the two-character escapes, other controls as lowercase \\u00xx, everything else as is,
    which is what the json module's C escaper writes (`encode_basestring`). A surrogate alone
    is not Unicode text and is refused."""
    if _SURROGATE.search(text):
        raise CanonicalError("a string holds a lone surrogate, which is not Unicode text")
    return encode_basestring(text)


def number(value: float) -> str:
    """A double as ECMAScript's Number::toString writes it (RFC 8785 section 3.2.2.3): the
    shortest digits that read back as the same double (Python's repr finds the same ones), laid
    out as plain digits from 1e-6 up to 1e21 and in exponent form outside."""
    if not math.isfinite(value):
        raise CanonicalError(f"{value} is not a JSON number (NaN and Infinity are refused)")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # value = 0.digits x 10**point, i.e. ECMAScript's n is `point` and k is len(digits).
    point = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        shown = point - 1
        head = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{head}e{'+' if shown >= 0 else '-'}{abs(shown)}"
    return sign + text


def digest(value: Any) -> str:
    """sha256 (hex) of a JSON value's canonical form."""
    return hashlib.sha256(canonical(value)).hexdigest()


def text_digest(text: str) -> str:
    """sha256 (hex) of a text's UTF-8 bytes (a context document, a rendered message)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode_bytes(raw: bytes) -> str:
    """base64url without padding: how keys and signatures are written."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_bytes(text: Any, length: int, what: str) -> bytes:
    """The bytes `text` encodes, refusing any other spelling (padding, spare bits): one form."""
    if not isinstance(text, str):
        raise ValueError(f"{what} is not a string")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as error:
        raise ValueError(f"{what} is not base64url") from error
    if len(raw) != length or encode_bytes(raw) != text:
        raise ValueError(f"{what} is not {length} bytes in base64url without padding")
    return raw


def instant(value: datetime) -> str:
    """How receipts write a moment: UTC, microseconds, `Z`."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_instant(text: Any, what: str) -> datetime:
    if not isinstance(text, str):
        raise ValueError(f"{what} is not a time")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as error:
        raise ValueError(f"{what} is not a time ({text!r})") from error
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PublicKey:
    """One key of a keys file: its id, Ed25519 public key and validity period."""

    key_id: str
    key: Ed25519PublicKey
    valid_from: datetime
    retired_at: datetime | None

    def valid_at(self, moment: datetime) -> bool:
        return self.valid_from <= moment and (self.retired_at is None or moment < self.retired_at)


Keys = Mapping[str, PublicKey]
"""A keys file's keys by id."""
_KEY_FIELDS = {"key_id", "algorithm", "public_key", "valid_from", "retired_at"}


def keys_body(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a keys file's signature covers: its format and its keys."""
    return {"format": KEYS_FORMAT, "keys": list(entries)}


def read_keys(document: Any) -> dict[str, PublicKey]:
    """The keys of a public keys file, by id; ValueError naming what is wrong with it (a
    malformed entry, or a signature that does not verify with the key it names)."""
    if not isinstance(document, dict) or set(document) != {"format", "keys", "signature"}:
        raise ValueError("the keys file is not a debatebot keys file (format, keys, signature)")
    if document["format"] != KEYS_FORMAT:
        raise ValueError(f"the keys file's format is {document['format']!r}, not {KEYS_FORMAT}")
    entries = document["keys"]
    if not isinstance(entries, list) or not entries:
        raise ValueError("the keys file lists no keys")
    found: dict[str, PublicKey] = {}
    for index, entry in enumerate(entries):
        where = f"keys[{index}]"
        if not isinstance(entry, dict) or set(entry) != _KEY_FIELDS:
            raise ValueError(f"{where} is not a key entry ({', '.join(sorted(_KEY_FIELDS))})")
        key_id = entry["key_id"]
        if not isinstance(key_id, str) or not key_id or key_id in found:
            raise ValueError(f"{where}.key_id is empty, not text, or listed twice")
        if entry["algorithm"] != ALGORITHM:
            raise ValueError(f"{where}.algorithm is {entry['algorithm']!r}, not {ALGORITHM}")
        raw = decode_bytes(entry["public_key"], 32, f"{where}.public_key")
        retired = entry["retired_at"]
        found[key_id] = PublicKey(
            key_id=key_id,
            key=Ed25519PublicKey.from_public_bytes(raw),
            valid_from=parse_instant(entry["valid_from"], f"{where}.valid_from"),
            retired_at=None if retired is None else parse_instant(retired, f"{where}.retired_at"),
        )
    problem = _signature_problem(
        document["signature"], keys_body(entries), found, at=None, what="the keys file"
    )
    if problem is not None:
        raise ValueError(problem)
    return found


def _signature_problem(
    block: Any, payload: Mapping[str, Any], keys: Keys, *, at: datetime | None, what: str
) -> str | None:
    """Why `block` is not a valid signature of `payload` by a key valid at `at` (None: a key
    not retired, as the keys file's signer must be); None when it is."""
    if block is None:
        return (
            f"{what} is UNSIGNED: the deployment had no receipt key, so nothing shows who made it"
        )
    if not isinstance(block, dict) or set(block) != {"algorithm", "key_id", "value"}:
        return f"{what}'s signature is not a signature block (algorithm, key_id, value)"
    if block["algorithm"] != ALGORITHM:
        return f"{what}'s signature algorithm is {block['algorithm']!r}, not {ALGORITHM}"
    key = keys.get(block["key_id"]) if isinstance(block["key_id"], str) else None
    if key is None:
        return f"{what} is signed by key {block['key_id']!r}, which the keys file does not list"
    if at is None and key.retired_at is not None:
        return f"{what} is signed by key {key.key_id}, which is retired"
    if at is not None and not key.valid_at(at):
        period = f"from {instant(key.valid_from)}" + (
            f" until its retirement at {instant(key.retired_at)}" if key.retired_at else ""
        )
        return (
            f"{what} says it was signed at {instant(at)} by key {key.key_id}, which is valid only"
            f" {period}: a retired key's signature made after its retirement is refused"
        )
    try:
        raw = decode_bytes(block["value"], 64, f"{what}'s signature value")
        key.key.verify(raw, canonical(payload))
    except ValueError as error:
        return str(error)
    except InvalidSignature:
        return (
            f"{what}'s signature does not verify with key {key.key_id}: its content was changed"
            " after it was signed (or it was signed by another key)"
        )
    return None


_RECEIPT_NAMES = (
    "format debate key_id issued_at workspace question context spec_sha256 protocol models turns"
    " verdict confidence cost timestamps review seal"
)
RECEIPT_FIELDS = tuple(_RECEIPT_NAMES.split())
"""Every field a receipt holds (its payload, which the signature covers)."""
_DECISION_NAMES = (
    "format seq receipt_sha256 previous_sha256 key_id issued_at kind decision by decided_at note"
    " shown_sha256"
)
DECISION_FIELDS = tuple(_DECISION_NAMES.split())
"""Every field a decision statement holds."""


@dataclass
class Report:
    """What verifying found: `problems` (empty when valid), and `facts` worth saying either way
    (which key signed, what was decided)."""

    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        verdict = ["receipt VALID"] if self.ok else ["receipt REFUSED:"]
        return [*verdict, *(f"  - {problem}" for problem in self.problems), *self.facts]


def verify(document: Any, keys_document: Any) -> Report:
    """Verify a receipt (or an export holding one) against a public keys file."""
    report = Report()
    try:
        keys = read_keys(keys_document)
    except ValueError as error:
        report.problems.append(f"keys file: {error}")
        return report
    export = None
    envelope = document
    if isinstance(document, dict) and "turn_rows" in document:
        export, envelope = document, document.get("receipt")
        if envelope is None:
            report.problems.append("the export holds no receipt (the debate had not finished)")
            return report
    payload = _envelope_problems(envelope, report)
    if payload is None:
        return report
    assert isinstance(envelope, dict)
    _check_receipt(payload, envelope["signature"], keys, report)
    _check_decisions(payload, envelope["decisions"], keys, report)
    if export is not None:
        _check_export(export, payload, envelope["decisions"], report)
    return report


def _envelope_problems(envelope: Any, report: Report) -> dict[str, Any] | None:
    """The receipt's payload when the envelope has the shape of one (else what is missing)."""
    shape = {"receipt", "signature", "decisions"}
    if not isinstance(envelope, dict) or set(envelope) != shape:
        found = sorted(envelope) if isinstance(envelope, dict) else type(envelope).__name__
        report.problems.append(f"not a receipt: it should hold {sorted(shape)}, it holds {found}")
        return None
    payload = envelope["receipt"]
    if not isinstance(payload, dict):
        report.problems.append("receipt is not an object")
        return None
    missing = [f"receipt.{name}" for name in RECEIPT_FIELDS if name not in payload]
    missing += [f"receipt.{name} (unknown)" for name in sorted(set(payload) - set(RECEIPT_FIELDS))]
    if missing:
        report.problems.append(f"receipt fields missing or added: {', '.join(missing)}")
        return None
    if payload["format"] != RECEIPT_FORMAT:
        report.problems.append(f"receipt.format is {payload['format']!r}, not {RECEIPT_FORMAT}")
        return None
    if not isinstance(envelope["decisions"], list):
        report.problems.append("decisions is not a list")
        return None
    return payload


def _signed_problem(signed: dict[str, Any], block: Any, keys: Keys, what: str) -> str | None:
    """Why `block` is not `signed`'s valid signature, by the key it names (`key_id`) and valid
    when it says it was signed (`issued_at`); None when it is."""
    try:
        issued = parse_instant(signed["issued_at"], f"{what}.issued_at")
    except ValueError as error:
        return str(error)
    if isinstance(block, dict) and block.get("key_id") != signed["key_id"]:
        return f"{what}'s signature names key {block.get('key_id')!r}, not {signed['key_id']!r}"
    return _signature_problem(block, signed, keys, at=issued, what=what)


def _check_receipt(payload: dict[str, Any], block: Any, keys: Keys, report: Report) -> None:
    problem = _signed_problem(payload, block, keys, "the receipt")
    if problem is not None:
        report.problems.append(problem)
        return
    report.facts.append(
        f"debate {payload['debate']}: {len(payload['turns'])} turns, verdict"
        f" {payload['verdict'].get('decision')}, signed by key {payload['key_id']} at"
        f" {payload['issued_at']}"
    )


def _check_decisions(payload: dict[str, Any], items: list[Any], keys: Keys, report: Report) -> None:
    """Each decision statement: its shape, its place (seq, chained to the receipt and the one
    before), and its signature by a key valid when it was made."""
    previous = receipt_digest = digest(payload)
    for index, item in enumerate(items):
        where = f"decision {index}"
        if not isinstance(item, dict) or set(item) != {"statement", "signature"}:
            report.problems.append(f"{where} is not a statement with its signature")
            continue
        statement = item["statement"]
        if not isinstance(statement, dict) or set(statement) != set(DECISION_FIELDS):
            found = sorted(statement) if isinstance(statement, dict) else None
            report.problems.append(f"{where}: fields should be {sorted(DECISION_FIELDS)}: {found}")
            continue
        if statement["format"] != DECISION_FORMAT or statement["seq"] != index:
            report.problems.append(f"{where}: format or seq changed (or a decision was removed)")
        elif statement["receipt_sha256"] != receipt_digest:
            report.problems.append(f"{where}: receipt_sha256 is not this receipt's digest")
        elif statement["previous_sha256"] != previous:
            report.problems.append(f"{where}: previous_sha256 does not follow the one before it")
        else:
            problem = _signed_problem(statement, item["signature"], keys, where)
            if problem is not None:
                report.problems.append(problem)
            else:
                note = f" ({statement['note']})" if statement["note"] else ""
                report.facts.append(
                    f"{where}: {statement['decision']} by {statement['by']} at"
                    f" {statement['decided_at']}{note}; shown review request sha256"
                    f" {str(statement['shown_sha256'])[:16]}"
                )
        previous = digest(statement)
    review = payload["review"]
    if not items and isinstance(review, dict) and review.get("requested"):
        report.facts.append(
            "the verdict asked for a human review; this receipt holds no decision (awaiting one,"
            " or a copy made before it)"
        )


def _check_export(
    export: dict[str, Any], payload: dict[str, Any], decisions: list[Any], report: Report
) -> None:
    """That what the export shows is what the receipt's digests say; each difference named."""
    problems = report.problems
    debate = export.get("debate") or {}
    spec = export.get("spec") or {}
    if debate.get("id") != payload["debate"]:
        problems.append(f"export: debate {debate.get('id')}, the receipt's is {payload['debate']}")
    if debate.get("question") != payload["question"] or spec.get("question") != payload["question"]:
        problems.append("export: the question differs from the receipt's")
    if _digest_or_none(spec) != payload["spec_sha256"]:
        problems.append("export: the spec (participants, models, options) differs from the receipt")
    documents, listed = _items(spec.get("context")), _items(payload["context"])
    if len(documents) != len(listed):
        problems.append(f"export: {len(documents)} documents where the receipt lists {len(listed)}")
    for index, (document, entry) in enumerate(zip(documents, listed, strict=False)):
        text = document.get("text") if isinstance(document, dict) else None
        wanted = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(text, str) or text_digest(text) != wanted:
            problems.append(f"export: context document {index} differs from the receipt's digest")
    workspace = payload["workspace"] if isinstance(payload["workspace"], dict) else {}
    team = workspace.get("team_id")
    if team != PENDING_TEAM and debate.get("team_id") != team:
        problems.append(f"export: workspace {debate.get('team_id')} is not the receipt's {team}")
    elif team == PENDING_TEAM and debate.get("team_id") != PENDING_TEAM:
        report.facts.append(
            "the receipt was issued before the deployment learnt its workspace's id (pending)"
        )
    _check_turns(export, payload["turns"], problems)
    result = export.get("result")
    verdict = payload["verdict"] if isinstance(payload["verdict"], dict) else {}
    if not isinstance(result, dict):
        problems.append("export: it has no result, but the receipt has a verdict")
    else:
        if _digest_or_none(result.get("verdict")) != verdict.get("sha256"):
            problems.append("export: the verdict differs from the receipt's digest")
        rest = {name: value for name, value in result.items() if name != "transcript"}
        if _digest_or_none(rest) != verdict.get("result_sha256"):
            problems.append("export: the result (beyond the transcript) differs from the receipt")
        row, shown = export.get("verdict_row"), result.get("verdict")
        if isinstance(row, dict) and isinstance(shown, dict):
            # The row's columns are the verdict's; its result document, the result's.
            document = _json_or_none(row.get("result_json"))
            inner = _differing(document, rest) if isinstance(document, dict) else "result_json"
            if differing := _differing(row, shown) or inner:
                problems.append(f"export: the verdict row differs from the result in {differing}")
    row = export.get("verdict_row") or {}
    seal = payload["seal"] if isinstance(payload["seal"], dict) else {}
    if row.get("chain_head") != seal.get("head"):
        problems.append("export: the audit seal's head is not the one the receipt names")
    _check_reviews(export.get("reviews"), decisions, problems)


def _check_turns(export: dict[str, Any], digests: Any, problems: list[str]) -> None:
    """The transcript against the receipt's digests, and the turn rows beside it (`audit
    verify-export` checks them against the seal) against it, in order, column by column."""
    turns, rows = _items(export.get("turns")), _items(export.get("turn_rows"))
    listed = _items(digests)
    for part, found in (("turns", turns), ("turn rows", rows)):
        if len(found) != len(listed):
            problems.append(f"export: {len(found)} {part} where the receipt lists {len(listed)}")
    for index, (shown, entry) in enumerate(zip(turns, listed, strict=False)):
        turn, wanted = (value if isinstance(value, dict) else {} for value in (shown, entry))
        row, usage = (rows[index] if index < len(rows) else None), turn.get("usage")
        if _digest_or_none(shown) != wanted.get("sha256"):
            what = f"round {turn.get('round')}, {turn.get('role')}"
            problems.append(f"export: turn {index} ({what}) differs from the receipt's digest")
        elif not isinstance(row, dict) or row.get("seq") != wanted.get("seq"):
            problems.append(f"export: turn row {index} is not in the receipt's order")
        elif differing := _differing(row, {**turn, **(usage if isinstance(usage, dict) else {})}):
            problems.append(f"export: turn row {index} differs from its turn in {differing}")


def _differing(stored: dict[str, Any], shown: dict[str, Any]) -> str:
    """The columns of a stored row that hold otherwise than the part shown (`X_json` as `X`)."""
    return ", ".join(
        column
        for column, value in stored.items()
        if (name := column.removesuffix("_json")) in shown
        and (_json_or_none(value) if name != column else value) != shown[name]
    )


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _check_reviews(reviews: Any, decisions: list[Any], problems: list[str]) -> None:
    """Each review the export records is a signed decision of the receipt, and the other way."""
    stated = [
        item["statement"]
        for item in decisions
        if isinstance(item, dict)
        and isinstance(item.get("statement"), dict)
        # A cancel (who stopped the debate) is signed like a decision but is no review.
        and item["statement"].get("kind") != "cancel"
    ]
    recorded = _items(reviews)
    for review in recorded:
        if not isinstance(review, dict) or not any(_same_review(review, s) for s in stated):
            who = review.get("reviewer") if isinstance(review, dict) else "?"
            problems.append(f"export: the review by {who} is not a signed decision of the receipt")
    for index, statement in enumerate(stated):
        if not any(isinstance(r, dict) and _same_review(r, statement) for r in recorded):
            problems.append(f"export: decision {index} is not among the export's reviews")


def _same_review(review: dict[str, Any], statement: dict[str, Any]) -> bool:
    try:
        same_time = parse_instant(review.get("created_at"), "review") == parse_instant(
            statement.get("decided_at"), "decision"
        )
    except ValueError:
        return False
    return (
        same_time
        and review.get("reviewer") == statement.get("by")
        and review.get("decision") == statement.get("decision")
        and (review.get("note") or None) == (statement.get("note") or None)
    )


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _digest_or_none(value: Any) -> str | None:
    try:
        return digest(value)
    except CanonicalError:
        return None


def read_json(path: str) -> Any:
    """A JSON file, at most MAX_FILE_BYTES; ValueError saying why it cannot be read."""
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from error
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not JSON: {error}") from error


def main(argv: Sequence[str] | None = None) -> int:
    """Verify; print what was found; 0 when valid, 1 when refused, 2 when a file is unreadable."""
    parser = argparse.ArgumentParser(
        prog="verify_receipt.py", description="Verify a debatebot receipt or export offline."
    )
    parser.add_argument("receipt", help="a receipt, or an export (debatebot export ID)")
    parser.add_argument("--keys", required=True, help="the public keys file (debatebot-keys.json)")
    args = parser.parse_args(argv)
    try:
        document, keys = read_json(args.receipt), read_json(args.keys)
    except ValueError as error:
        sys.stderr.write(f"verify_receipt: {error}\n")
        return 2
    report = verify(document, keys)
    (sys.stdout if report.ok else sys.stderr).write("\n".join(report.lines()) + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
