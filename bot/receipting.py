"""Where receipts' keys are and what signs receipts, as the settings say (beside the composition
root, `bot.wiring`, which hands the issuer to workers and reviews).

No receipt key setting: with SQLite, the folder `debatebot-receipt-keys` beside the database
file, where the first receipt makes a key (so `debatebot run` on the defaults signs with a key of
its own); with PostgreSQL, shared by replicas that must sign with one key, nothing is made and
receipts are written unsigned (marked so; the verifier refuses them), and `serve` and `worker`
warn at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from bot.keyring import KeyRing, KeyRingError, Signer, public_json
from bot.providers import ProviderRegistry
from bot.settings import Settings, SettingsError
from bot.store.db import sqlite_file
from bot.store.receipts import ReceiptIssuer
from engine.errors import LLMError

log = logging.getLogger(__name__)

DEFAULT_KEYS_DIR = "debatebot-receipt-keys"
"""The folder of receipt keys beside a SQLite database when DEBATEBOT_RECEIPT_KEYS_DIR is unset."""


def receipt_keys(settings: Settings) -> KeyRing | None:
    """The receipt keys' folder: the setting, else beside a SQLite database file; None for
    PostgreSQL (and in-memory SQLite) without the setting."""
    if settings.receipt_keys_dir is not None:
        return KeyRing(settings.receipt_keys_dir.expanduser())
    database = sqlite_file(settings.database_url)
    return KeyRing(database.parent / DEFAULT_KEYS_DIR) if database is not None else None


def receipt_issuer(settings: Settings, registry: ProviderRegistry) -> ReceiptIssuer:
    """What signs receipts: the newest key in service of `receipt_keys`, read for each batch of
    endings (a rotation takes effect at once), or nothing (unsigned receipts)."""
    ring = receipt_keys(settings)

    def signer() -> Signer | None:
        if ring is None:
            return None
        try:
            return ring.signer(create=True)
        except (KeyRingError, OSError) as error:
            # The ending (the verdict, its seal) must still be stored: its receipt is written
            # marked unsigned, which the verdict message and every verifier say.
            log.error("receipts are written UNSIGNED: %s", error)
            return None

    def price_of(provider: str, model: str) -> Mapping[str, float] | None:
        try:
            price = registry.pricing(provider, model)
        except LLMError:
            return None
        listed = price.model_dump(exclude={"long_context"}, exclude_none=True)
        return {name: float(value) for name, value in listed.items()}

    return ReceiptIssuer(signer=signer, price_of=price_of)


def check_receipt_keys(settings: Settings) -> str | None:
    """Start-up: SettingsError when the receipt keys cannot be trusted (an edited keys file, a
    missing or world-readable private key); a warning to log when receipts will be unsigned (no
    folder for them, or one the bot cannot write yet)."""
    ring = receipt_keys(settings)
    if ring is None:
        return (
            "DEBATEBOT_RECEIPT_KEYS_DIR is not set: decision receipts are written UNSIGNED. Set it"
            " to a folder every replica reads and run `debatebot keys new` (see docs/audit.md)"
        )
    if settings.receipt_keys_dir is None and not ring.directory.parent.exists():
        # The default folder sits beside the SQLite file: when the database's own folder is
        # gone (a deleted data directory, a volume not mounted), opening the store refuses
        # with what to do, and making the keys here would create that folder in its place.
        return None
    try:
        ring.signer(create=True)
    except KeyRingError as error:
        raise SettingsError(f"receipt keys in {ring.directory}: {error}") from error
    except OSError as error:
        # A folder the bot cannot write (a read-only store's, say) is not a forged key: the bot
        # serves read-only, and each ending tries to make the key again, so receipts are signed
        # again as soon as the folder is writable.
        return (
            f"receipt keys in {ring.directory} cannot be written ({error.strerror or error}):"
            " decision receipts are written UNSIGNED until it can; make that folder writable by"
            " the bot's user"
        )
    return None


def public_keys_of(settings: Settings) -> Callable[[], bytes | None]:
    """The public keys file as `/.well-known/debatebot-keys.json` serves it, read at each
    request (a rotation shows at once); None when there are no keys."""
    ring = receipt_keys(settings)

    def read() -> bytes | None:
        if ring is None:
            return None
        try:
            document = ring.public_document()
        except KeyRingError as error:
            log.error("the receipt keys' public file cannot be served: %s", error)
            return None
        return public_json(document) if document is not None else None

    return read
