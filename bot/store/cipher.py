"""Encryption of the Slack tokens OAuth installs store: AES-256-GCM with a key derived from
DEBATEBOT_TOKEN_ENCRYPTION_KEY.

A database dump, a backup or a replica read by the wrong person holds no usable token. Each
ciphertext is bound to where it is stored (the installation, the person, the column) as GCM's
associated data, so one copied into another workspace's row, or from the refresh token's column
into the access token's, is refused rather than used: the database's owner can delete a token,
never move one.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bot.store.errors import TokenDecryptError

VERSION = "v1"
"""The scheme of a sealed value (`v1.` + base64url of nonce and ciphertext); a later key or
algorithm gets a new prefix, so stored values say how to open them."""
NONCE_BYTES = 12
"""GCM's standard nonce, random per value: at a few tokens per install and rotation, far below
the 2**32 encryptions under one key NIST allows random 96-bit nonces."""
KEY_INFO = b"debatebot slack tokens v1"


class TokenCipher:
    """Seals tokens with the first of its keys and opens them with any (a key rotation in
    progress: the new key first, the old ones after it until `debatebot workspace rekey` has
    sealed every stored token again); `where` names the value's place in the store."""

    def __init__(self, secret: bytes, *older: bytes) -> None:
        # Each secret is a long random string (settings refuse short ones and placeholders);
        # HKDF turns it into the 256-bit key AES-GCM takes, whatever its length.
        self._aeads = [
            AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_INFO).derive(s))
            for s in (secret, *older)
        ]

    def seal(self, plain: str, *, where: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aeads[0].encrypt(nonce, plain.encode(), where.encode())
        return f"{VERSION}." + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, *, where: str) -> str:
        """The token sealed at `where`; TokenDecryptError when it does not open there."""
        return self.opened(sealed, where=where)[0]

    def opened(self, sealed: str, *, where: str) -> tuple[str, int]:
        """The token sealed at `where` and the index of the key that opened it (0: the key
        that seals); TokenDecryptError when no key opens it there."""
        version, _, body = sealed.partition(".")
        if version != VERSION:
            raise TokenDecryptError(
                f"the token stored at {where} is not sealed the way this debatebot seals"
                f" tokens ({VERSION}); the row was written by something else"
            )
        try:
            raw = base64.urlsafe_b64decode(body.encode("ascii"))
        except ValueError as error:  # binascii's errors are ValueErrors
            raise _undecryptable(where) from error
        for index, aead in enumerate(self._aeads):
            try:
                plain = aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], where.encode())
                return plain.decode(), index
            except (InvalidTag, ValueError):  # UTF-8's errors are ValueErrors
                continue
        raise _undecryptable(where)


def _undecryptable(where: str) -> TokenDecryptError:
    return TokenDecryptError(
        f"the token stored at {where} does not decrypt: no key of DEBATEBOT_TOKEN_ENCRYPTION_KEY is"
        " the key it was stored with, or the row was edited. Add the key the tokens were stored"
        " with after the new one (comma-separated), or install the app in that workspace again"
    )
