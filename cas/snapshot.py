"""Snapshots: a whole recorded root, as a small canonical JSON document."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .digest import Digest, from_hex, snapshot_digest, to_hex
from .errors import EarshotError


class CorruptSnapshot(EarshotError):
    """A stored snapshot record that does not decode."""

    def __init__(self, why: str) -> None:
        super().__init__(f"corrupt snapshot record: {why}")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A recorded root: its tree, when, by which session, and why."""

    tree: Digest
    time_ns: int
    root: str
    note: str = ""
    session: str | None = None
    files: int = 0
    content_bytes: int = 0
    unrecorded: int = 0


def encode_snapshot(snap: Snapshot) -> bytes:
    """Canonical form: sorted keys, no spaces, ASCII only."""
    doc = {
        "v": 1,
        "tree": to_hex(snap.tree),
        "time_ns": snap.time_ns,
        "root": snap.root,
        "note": snap.note,
        "session": snap.session,
        "files": snap.files,
        "content_bytes": snap.content_bytes,
        "unrecorded": snap.unrecorded,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def decode_snapshot(data: bytes | memoryview) -> Snapshot:
    """Parse a stored snapshot record."""
    try:
        doc = json.loads(bytes(data))
        if not isinstance(doc, dict):
            raise CorruptSnapshot("not a JSON object")
        if not isinstance(doc.get("tree"), str):
            raise CorruptSnapshot("no tree digest")
        session = doc.get("session")
        if session is not None and not isinstance(session, str):
            raise CorruptSnapshot("session is not text")
        if doc.get("v") != 1:
            raise CorruptSnapshot(f"unknown version {doc.get('v')!r}")
        return Snapshot(
            tree=from_hex(doc["tree"]),
            time_ns=int(doc["time_ns"]),
            root=str(doc["root"]),
            note=str(doc["note"]),
            session=doc["session"],
            files=int(doc["files"]),
            content_bytes=int(doc["content_bytes"]),
            unrecorded=int(doc["unrecorded"]),
        )
    except CorruptSnapshot:
        raise
    except _UNREADABLE as exc:
        raise CorruptSnapshot(str(exc)) from None


#: What a record that is not a snapshot raises on the way. OverflowError: a
#: count of 1e999 is JSON, and infinity is no int; RecursionError: nesting
#: past what json reads.
_UNREADABLE = (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    OverflowError,
    RecursionError,
    EarshotError,
)


def hash_snapshot(snap: Snapshot) -> tuple[Digest, bytes]:
    """Encode a snapshot and return (digest, encoding)."""
    encoded = encode_snapshot(snap)
    return snapshot_digest(encoded), encoded
