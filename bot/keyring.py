"""The keys that sign decision receipts: a folder holding the public keys file and the private
keys, which `debatebot keys new|list|rotate|retire` manage and workers sign with.

    DIR/keys.json              the public keys file (ids, public keys, validity periods), signed
                               by the newest key still in service; what auditors are given
    DIR/private/KEY_ID.pem     each key in service's Ed25519 private key (PKCS#8), mode 0600

The folder is `DEBATEBOT_RECEIPT_KEYS_DIR`; with SQLite and no setting it is
`debatebot-receipt-keys` beside the database file, so `debatebot run` signs with a key of its own
made on first use. A retired key's private file is deleted (it must never sign again) and its
public key stays in the file, with the moment it was retired, so receipts it signed before then
keep verifying and any it signs after are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.receipt_verifier import (
    ALGORITHM,
    canonical,
    encode_bytes,
    instant,
    keys_body,
    parse_instant,
    read_keys,
)
from engine.models import utcnow

PUBLIC_FILE = "keys.json"
PRIVATE_DIR = "private"
LOCK_FILE = ".lock"


class KeyRingError(Exception):
    """The key folder cannot do what was asked; the message says what to change."""


@dataclass(frozen=True)
class Signer:
    """The key new receipts are signed with."""

    key_id: str
    private_key: Ed25519PrivateKey

    def sign(self, payload: dict[str, Any]) -> dict[str, str]:
        """The signature block of `payload` (its canonical form, signed with Ed25519)."""
        value = self.private_key.sign(canonical(payload))
        return {"algorithm": ALGORITHM, "key_id": self.key_id, "value": encode_bytes(value)}


@dataclass(frozen=True)
class KeyEntry:
    """One key as the public keys file lists it."""

    key_id: str
    public_key: str
    valid_from: datetime
    retired_at: datetime | None

    @property
    def retired(self) -> bool:
        return self.retired_at is not None

    def document(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "algorithm": ALGORITHM,
            "public_key": self.public_key,
            "valid_from": instant(self.valid_from),
            "retired_at": None if self.retired_at is None else instant(self.retired_at),
        }


class KeyRing:
    """The receipt keys in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def public_file(self) -> Path:
        return self.directory / PUBLIC_FILE

    def entries(self) -> list[KeyEntry]:
        """The keys the public file lists, oldest first (none when there is no file yet).
        KeyRingError when the file does not verify: someone edited it."""
        document = self.public_document()
        if document is None:
            return []
        try:
            read_keys(document)
        except ValueError as error:
            raise KeyRingError(
                f"{self.public_file} does not verify ({error}): it was edited outside"
                " `debatebot keys`; restore it from a backup"
            ) from error
        return [
            KeyEntry(
                key_id=entry["key_id"],
                public_key=entry["public_key"],
                valid_from=parse_instant(entry["valid_from"], "valid_from"),
                retired_at=(
                    None
                    if entry["retired_at"] is None
                    else parse_instant(entry["retired_at"], "retired_at")
                ),
            )
            for entry in document["keys"]
        ]

    def public_document(self) -> dict[str, Any] | None:
        """The public keys file as stored, or None when no key was made yet."""
        try:
            text = self.public_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as error:
            raise KeyRingError(f"cannot read {self.public_file}: {error.strerror}") from error
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise KeyRingError(f"{self.public_file} is not JSON ({error}); restore it") from error
        if not isinstance(document, dict):
            raise KeyRingError(f"{self.public_file} is not a keys file; restore it")
        return document

    def signer(self, *, create: bool = False) -> Signer | None:
        """The newest key in service, with its private key; with `create`, a first key is made
        when the folder holds none. None when there is no key (and `create` is off)."""
        active = [entry for entry in self.entries() if not entry.retired]
        if not active:
            if not create:
                return None
            self.new()
            active = [entry for entry in self.entries() if not entry.retired]
        newest = active[-1]
        return Signer(newest.key_id, self._private(newest.key_id))

    def new(self, *, now: datetime | None = None) -> KeyEntry:
        """Make a key; it signs every receipt from now on. Keys made before stay in service
        (valid for receipts they sign) until retired."""
        with self._locked():
            return self._add(now or utcnow())

    def rotate(self, *, now: datetime | None = None) -> tuple[KeyEntry, list[KeyEntry]]:
        """Make a key and retire every other key in service: (the new key, those retired)."""
        at = now or utcnow()
        with self._locked():
            made = self._add(at)
            ids = {e.key_id for e in self.entries() if not e.retired and e.key_id != made.key_id}
            self._retire(ids, at)
        return made, [entry for entry in self.entries() if entry.key_id in ids]

    def retire(self, key_id: str, *, now: datetime | None = None) -> KeyEntry:
        """Retire one key: its receipts made so far keep verifying, any it signs later are
        refused, and its private key is deleted. The last key in service is not retired
        (receipts would go unsigned): `rotate` replaces it."""
        at = now or utcnow()
        with self._locked():
            entries = {entry.key_id: entry for entry in self.entries()}
            entry = entries.get(key_id)
            if entry is None:
                known = ", ".join(entries) or "none"
                raise KeyRingError(f"no key {key_id!r} here (keys: {known})")
            if entry.retired:
                raise KeyRingError(f"key {key_id} was retired already, at {entry.retired_at}")
            if not [e for e in entries.values() if not e.retired and e.key_id != key_id]:
                raise KeyRingError(
                    f"key {key_id} is the only key in service: `debatebot keys rotate` makes a"
                    " new one and retires it"
                )
            self._retire({key_id}, at)
        return next(e for e in self.entries() if e.key_id == key_id)

    # --- writing -------------------------------------------------------------------------------

    def _add(self, at: datetime) -> KeyEntry:
        entries = self.entries()
        private = Ed25519PrivateKey.generate()
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        key_id = f"{at.strftime('%Y%m%d')}-{hashlib.sha256(raw).hexdigest()[:12]}"
        entry = KeyEntry(key_id, encode_bytes(raw), at, None)
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        folder = self.directory / PRIVATE_DIR
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{key_id}.pem"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        self._write([*entries, entry], Signer(key_id, private))
        return entry

    def _retire(self, key_ids: set[str], at: datetime) -> None:
        entries = [
            KeyEntry(e.key_id, e.public_key, e.valid_from, at) if e.key_id in key_ids else e
            for e in self.entries()
        ]
        active = [entry for entry in entries if not entry.retired]
        self._write(entries, Signer(active[-1].key_id, self._private(active[-1].key_id)))
        for key_id in key_ids:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / PRIVATE_DIR / f"{key_id}.pem").unlink()

    def _write(self, entries: list[KeyEntry], signer: Signer) -> None:
        """Write the public keys file, signed by `signer`, atomically (a reader sees the old
        file or the new one)."""
        body = keys_body([entry.document() for entry in entries])
        document = {**body, "signature": signer.sign(body)}
        temporary = self.public_file.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        temporary.replace(self.public_file)

    def _private(self, key_id: str) -> Ed25519PrivateKey:
        path = self.directory / PRIVATE_DIR / f"{key_id}.pem"
        try:
            mode = path.stat().st_mode
            data = path.read_bytes()
        except FileNotFoundError:
            raise KeyRingError(
                f"the private key of {key_id} is missing ({path}): restore it, or run"
                " `debatebot keys rotate` to sign with a new key"
            ) from None
        except OSError as error:
            raise KeyRingError(f"cannot read {path}: {error.strerror}") from error
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyRingError(
                f"{path} can be read by others than its owner; `chmod 600 {path}` (a receipt key"
                " anyone can read signs anyone's receipts)"
            )
        loaded = serialization.load_pem_private_key(data, password=None)
        if not isinstance(loaded, Ed25519PrivateKey):
            raise KeyRingError(f"{path} is not an Ed25519 private key")
        return loaded

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time (two `keys` commands, or two first uses at once)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = self.directory / LOCK_FILE
        try:
            descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise KeyRingError(
                f"{lock} exists: another `debatebot keys` is changing the keys; if none is,"
                " delete the file"
            ) from None
        os.close(descriptor)
        try:
            yield
        finally:
            lock.unlink()


def public_json(document: dict[str, Any]) -> bytes:
    """The public keys file as served and printed."""
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")
