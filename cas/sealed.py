"""Records sealed with a digest: a damaged record is refused, never misread.

Small records that steer what earshot does to the tree (a batch's ledger, a
session's state, an intent) are JSON, and JSON survives many flipped bytes
as *different valid JSON*: ``src/f1.txt`` becomes ``src/f2.txt`` and undo
writes one file's content into another. So each value carries a keyed digest
of its key and payload; a value that does not match is a ``CorruptRecord``.
The key is part of the digest, so a value moved under another key fails too.

    value = b"S1" + BLAKE3-derive-key(key-length, key, payload)[:16] + payload
"""

from __future__ import annotations

import json
from typing import Any

import blake3

from .errors import EarshotError

MAGIC = b"S1"
_MAC_SIZE = 16
_CONTEXT = "earshot 2026 sealed record v1"


class CorruptRecord(EarshotError):
    """A stored record whose digest does not match: damaged on disk."""

    def __init__(self, what: str, why: str = "its digest does not match its content") -> None:
        super().__init__(f"{what} is damaged ({why}); run 'earshot fsck'")
        self.what = what
        self.why = why


def _mac(key: bytes, payload: bytes) -> bytes:
    hasher = blake3.blake3(derive_key_context=_CONTEXT)
    hasher.update(len(key).to_bytes(4, "big"))
    hasher.update(key)
    hasher.update(payload)
    return hasher.digest(length=_MAC_SIZE)


def seal(key: bytes, payload: bytes) -> bytes:
    """The stored form of ``payload`` under ``key``."""
    return MAGIC + _mac(key, payload) + payload


def unseal(key: bytes, value: bytes, what: str) -> bytes:
    """The payload of a sealed value; ``CorruptRecord`` (naming ``what``) if damaged."""
    if value[:2] != MAGIC or len(value) < 2 + _MAC_SIZE:
        raise CorruptRecord(what, "it is not a sealed record")
    payload = value[2 + _MAC_SIZE :]
    if value[2 : 2 + _MAC_SIZE] != _mac(key, payload):
        raise CorruptRecord(what)
    return payload


def is_sealed(key: bytes, value: bytes) -> bool:
    """Whether ``value`` is a sound sealed record under ``key``."""
    return value[:2] == MAGIC and value[2 : 2 + _MAC_SIZE] == _mac(key, value[2 + _MAC_SIZE :])


def seal_json(key: bytes, doc: Any) -> bytes:
    # ASCII escapes: a path that is not UTF-8 is a lone surrogate, which only
    # an escape can carry through JSON.
    return seal(key, json.dumps(doc, separators=(",", ":")).encode())


def unseal_json(key: bytes, value: bytes, what: str) -> Any:
    """A sealed JSON document; ``CorruptRecord`` if damaged or not JSON."""
    payload = unseal(key, value, what)
    try:
        return json.loads(payload)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past what json reads
        raise CorruptRecord(what, f"sealed, but not JSON: {exc}") from None
