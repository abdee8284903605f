"""A debate's receipt as a file in its thread (issue 46): the JSON `debatebot export N --format
receipt` writes, uploaded when the receipt is issued (with the verdict) and again each time a
signed decision joins it (a reviewer's Approve or Reject). The outbox has no action for files
(its CHECK constraint lists post, update and stream; a new one needs a migration), so the
upload is a post of the debate's lane, after the verdict, whose one block is the file: its key
says which version of the receipt it is (`receipt:N`, N the decisions joined), and the
delivery shares it with Slack's upload steps instead of `chat.postMessage`
(bot.jobs.delivery.files). Where the app lacks `files:write`, the thread gets `fallback`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.messages.kit import Message, context
from bot.store.outbox import Draft

RECEIPT_FILE = "receipt"
"""The key prefix of a debate's receipt files (`receipt:0`, `receipt:1` ...)."""
FILE_PART = "receipt_file"
"""The type of the one entry of the row's blocks that holds the file."""
KEYS_PATH = "/.well-known/debatebot-keys.json"
VERIFY = f"`python tools/verify_receipt.py FILE --keys KEYS.json` (the keys: `{KEYS_PATH}`)"
"""How anyone checks a receipt offline (python and `cryptography`, no debatebot)."""


def file_name(debate_id: int) -> str:
    return f"debate-{debate_id}-receipt.json"


def is_file(key: str) -> bool:
    """Whether the owed post `key` is a receipt file."""
    return key.startswith(f"{RECEIPT_FILE}:")


@dataclass(frozen=True)
class ReceiptFile:
    """The file owed: its name, the receipt document (as `receipt_of` hands it out) and the
    one line introducing it."""

    debate_id: int
    filename: str
    document: dict[str, Any]
    comment: str

    @property
    def content(self) -> bytes:
        """The file's bytes: what `debatebot export N --format receipt` writes."""
        return json.dumps(self.document, indent=2, ensure_ascii=False).encode("utf-8")

    def draft(self) -> Draft:
        part = {"type": FILE_PART, "filename": self.filename, "document": self.document}
        return Draft(
            key=f"{RECEIPT_FILE}:{len(self.document['decisions'])}",
            text=self.comment,
            blocks=[part],
        )

    @classmethod
    def of_row(cls, debate_id: int, text: str, blocks: list[dict[str, Any]]) -> ReceiptFile:
        """The file a stored row holds (written by `draft`)."""
        part = next(b for b in blocks if b.get("type") == FILE_PART)
        return cls(debate_id, str(part["filename"]), dict(part["document"]), text)

    def fallback(self) -> Message:
        """What the thread is told instead when the app cannot upload files (no `files:write`):
        the command that downloads the same receipt."""
        text = (
            f":receipt: The receipt of debate #{self.debate_id} could not be attached (the app"
            f" lacks Slack's `files:write` scope): `debatebot export {self.debate_id} --format"
            f" receipt` downloads it; check it with {VERIFY}"
        )
        return Message(text, [context(text)])


def receipt_file(debate_id: int, document: Mapping[str, Any]) -> ReceiptFile:
    """The receipt file of `document`, introduced by who signed its newest part and how to
    check it offline."""
    decisions = list(document["decisions"])
    signature = (decisions[-1] if decisions else document)["signature"]
    signed = f"signed with key `{signature['key_id']}`" if signature else "UNSIGNED"
    if decisions:
        last = decisions[-1]["statement"]
        what = f"with the {last['kind']} decision `{last['decision']}` joined,"
    else:
        what = "as issued,"
    comment = (
        f":receipt: Receipt of debate #{debate_id} {what} {signed}. Check it offline with {VERIFY}."
    )
    return ReceiptFile(debate_id, file_name(debate_id), dict(document), comment)
