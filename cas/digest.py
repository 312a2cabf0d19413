"""Content addresses: 32-byte BLAKE3 digests and their hex forms.

A blob's digest is the plain BLAKE3 of its bytes, so ``b3sum`` agrees with it.
Trees and snapshots are hashed in BLAKE3's key-derivation mode with a context
string of their own, so no file's content can ever share a digest with a tree
or a snapshot.
"""

from __future__ import annotations

import re
from typing import NewType

import blake3

from .errors import EarshotError

Digest = NewType("Digest", bytes)

DIGEST_SIZE = 32
SHORT_HEX = 12
MIN_PREFIX_HEX = 8

TREE_CONTEXT = "earshot 2026 tree v1"
SNAPSHOT_CONTEXT = "earshot 2026 snapshot v1"

_HEX = re.compile(r"[0-9a-f]+")


class BadDigest(EarshotError):
    """A string that is not a digest or a digest prefix."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(f"{text!r} is not a valid snapshot id: {why}")
        self.text = text


def blob_digest(data: bytes | memoryview) -> Digest:
    """The digest of a blob: plain BLAKE3 of its bytes."""
    return Digest(blake3.blake3(data).digest())


def tree_digest(encoded: bytes) -> Digest:
    """The digest of an encoded tree."""
    return Digest(blake3.blake3(encoded, derive_key_context=TREE_CONTEXT).digest())


def snapshot_digest(encoded: bytes) -> Digest:
    """The digest of an encoded snapshot."""
    return Digest(blake3.blake3(encoded, derive_key_context=SNAPSHOT_CONTEXT).digest())


def to_hex(digest: Digest) -> str:
    """The full 64-digit lowercase hex form."""
    return digest.hex()


def short(digest: Digest) -> str:
    """A short hex form for people; not guaranteed unique."""
    return digest.hex()[:SHORT_HEX]


def from_hex(text: str) -> Digest:
    """Parse a full 64-digit hex digest."""
    text = text.strip().lower()
    if len(text) != 2 * DIGEST_SIZE or not _HEX.fullmatch(text):
        raise BadDigest(text, f"expected {2 * DIGEST_SIZE} hex digits")
    return Digest(bytes.fromhex(text))


def check_prefix(text: str) -> str:
    """Normalise a hex prefix given by a person, at least 8 digits long."""
    text = text.strip().lower()
    if not _HEX.fullmatch(text):
        raise BadDigest(text, "an id is hex digits")
    if len(text) < MIN_PREFIX_HEX:
        raise BadDigest(text, f"give at least {MIN_PREFIX_HEX} hex digits")
    if len(text) > 2 * DIGEST_SIZE:
        raise BadDigest(text, f"longer than {2 * DIGEST_SIZE} hex digits")
    return text
