"""`debatebot keys`: make, list, rotate and retire the keys that sign decision receipts; and the
receipt check `audit verify-export` runs (the verifier auditors run, `bot.receipt_verifier`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bot import receipt_verifier
from bot.keyring import KeyRing, KeyRingError, public_json
from bot.receipting import receipt_keys
from bot.settings import Settings


def keys(args: argparse.Namespace) -> int:
    ring = receipt_keys(Settings())
    if ring is None:
        print(
            "debatebot: no folder for receipt keys: set DEBATEBOT_RECEIPT_KEYS_DIR (with"
            " PostgreSQL every replica must read the same folder)",
            file=sys.stderr,
        )
        return 2
    try:
        return _act(ring, args)
    except KeyRingError as error:
        print(f"debatebot: {error}", file=sys.stderr)
        return 1


def _act(ring: KeyRing, args: argparse.Namespace) -> int:
    if args.action != "retire" and args.key_id is not None:
        print(f"debatebot: keys {args.action} takes no key id", file=sys.stderr)
        return 2
    if args.action == "new":
        made = ring.new()
        print(f"made key {made.key_id} in {ring.directory}; it signs every receipt from now on")
        return 0
    if args.action == "rotate":
        made, retired = ring.rotate()
        print(f"made key {made.key_id}; it signs every receipt from now on")
        for entry in retired:
            print(
                f"retired key {entry.key_id}: receipts it signed before {entry.retired_at}"
                " keep verifying, any it signs from now on are refused"
            )
        _publish_note(ring)
        return 0
    if args.action == "retire":
        if args.key_id is None:
            print("debatebot: keys retire takes the id of the key to retire", file=sys.stderr)
            return 2
        entry = ring.retire(args.key_id)
        print(f"retired key {entry.key_id} at {entry.retired_at}; its private key is deleted")
        _publish_note(ring)
        return 0
    return _list(ring, args)


def _list(ring: KeyRing, args: argparse.Namespace) -> int:
    document = ring.public_document()
    entries = ring.entries()
    if args.json:
        if document is None:
            print("debatebot: no receipt key yet: `debatebot keys new`", file=sys.stderr)
            return 1
        sys.stdout.buffer.write(public_json(document))
        return 0
    if not entries:
        print(f"no receipt keys in {ring.directory} (the first receipt makes one)")
        return 0
    signing = [entry for entry in entries if not entry.retired][-1:]
    for entry in entries:
        state = (
            f"retired {entry.retired_at}"
            if entry.retired
            else "signs new receipts"
            if entry in signing
            else "in service"
        )
        line = f"{entry.key_id}  valid from {entry.valid_from}  {state}"
        if args.public:
            line += f"  public key {entry.public_key}"
        print(line)
    return 0


def _publish_note(ring: KeyRing) -> None:
    print(
        f"the public keys file ({ring.public_file}) changed: `serve` serves it at"
        " /.well-known/debatebot-keys.json; give auditors the new copy"
    )


def check_receipt(record: dict[str, Any], keys_file: str | None, settings: Settings) -> int:
    """`audit verify-export`'s receipt check: the export's receipt and what it shows, by the
    verifier auditors run, with `keys_file` or this deployment's public keys; 0 when valid or
    when the export holds no receipt to check (made before receipts, or unfinished)."""
    if "receipt" not in record or record["receipt"] is None:
        print("receipt: none in this export (made before receipts, or not finished)")
        return 0
    if keys_file is not None:
        try:
            keys_document = receipt_verifier.read_json(keys_file)
        except ValueError as error:
            print(f"debatebot: {error}", file=sys.stderr)
            return 1
    else:
        ring = receipt_keys(settings)
        keys_document = ring.public_document() if ring is not None else None
        if keys_document is None:
            print(
                "debatebot: receipt not checked: no public keys file here; pass --keys KEYS.json",
                file=sys.stderr,
            )
            return 1
    report = receipt_verifier.verify(json.loads(json.dumps(record)), keys_document)
    (sys.stdout if report.ok else sys.stderr).write("\n".join(report.lines()) + "\n")
    return 0 if report.ok else 1
