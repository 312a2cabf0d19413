"""The checkpoint records of the agent layer: batches, their ledgers, sessions.

They live in the project's own store, in two tables beside the objects:
``batches`` (key: session id + 4-byte sequence number) and ``sessions``
(key: session id). Values are small JSON documents: they are read a few at a
time, by people as much as by code (``earshot log --json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from earshot.cas.backend import ReadView, WriteBatch
from earshot.cas.digest import Digest
from earshot.cas.tree import Kind, TreeEntry

TABLES = ("batches", "sessions")


@dataclass(frozen=True, slots=True)
class State:
    """What a path held: a file or symlink (kind, permission bits, content digest)."""

    kind: Kind
    mode: int
    digest: Digest

    @staticmethod
    def of(entry: TreeEntry | None) -> State | None:
        if entry is None or entry.digest is None or entry.kind not in (Kind.FILE, Kind.SYMLINK):
            return None
        return State(entry.kind, entry.mode, entry.digest)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.name.lower(), "mode": self.mode, "digest": self.digest.hex()}

    @staticmethod
    def from_json(doc: dict[str, Any] | None) -> State | None:
        if doc is None:
            return None
        return State(
            Kind[doc["kind"].upper()], int(doc["mode"]), Digest(bytes.fromhex(doc["digest"]))
        )


#: Who made a change: a call's index in its batch, or one of these.
BY_WATCHER = "watcher"
BY_RESTAGE = "restage"


@dataclass(frozen=True, slots=True)
class Change:
    """One ledger line: a path went from ``before`` to ``after`` (None = absent)."""

    path: str
    before: State | None
    after: State | None
    by: int | str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
            "by": self.by,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Change:
        return Change(
            doc["path"], State.from_json(doc["before"]), State.from_json(doc["after"]), doc["by"]
        )


class BatchKind(Enum):
    """A batch of the agent's tool calls, or one made by earshot itself."""

    CALLS = "calls"
    UNDO = "undo"
    REDO = "redo"
    REWIND = "rewind"

    @property
    def self_created(self) -> bool:
        return self is not BatchKind.CALLS


@dataclass(frozen=True, slots=True)
class Batch:
    """The tool calls of one model turn and exactly what they changed."""

    session: str
    seq: int
    kind: BatchKind
    time_ns: int
    calls: tuple[dict[str, Any], ...]
    before: Digest | None
    after: Digest | None
    ledger: tuple[Change, ...]
    #: Its changes could not be seen (tree over the restage budget, no
    #: watcher): they went into the next snapshot and undo steps around it.
    folded: bool = False
    #: For undo/redo batches: the batches they reverted or replayed.
    targets: tuple[int, ...] = ()
    #: Set on a batch when an undo reverts it; cleared by the redo of that undo.
    undone_by: int | None = None
    #: Set on an undo batch once a redo has replayed it.
    redone_by: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.ledger)

    @property
    def undoable(self) -> bool:
        return self.kind is BatchKind.CALLS and self.changed and self.undone_by is None

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "seq": self.seq,
            "kind": self.kind.value,
            "time_ns": self.time_ns,
            "calls": list(self.calls),
            "before": self.before.hex() if self.before else None,
            "after": self.after.hex() if self.after else None,
            "ledger": [c.to_json() for c in self.ledger],
            "folded": self.folded,
            "targets": list(self.targets),
            "undone_by": self.undone_by,
            "redone_by": self.redone_by,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Batch:
        def digest(text: str | None) -> Digest | None:
            return Digest(bytes.fromhex(text)) if text else None

        return Batch(
            session=doc["session"],
            seq=int(doc["seq"]),
            kind=BatchKind(doc["kind"]),
            time_ns=int(doc["time_ns"]),
            calls=tuple(doc["calls"]),
            before=digest(doc["before"]),
            after=digest(doc["after"]),
            ledger=tuple(Change.from_json(c) for c in doc["ledger"]),
            folded=bool(doc.get("folded", False)),
            targets=tuple(doc.get("targets", ())),
            undone_by=doc.get("undone_by"),
            redone_by=doc.get("redone_by"),
        )


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's checkpoint state, persisted so a later process knows it."""

    id: str
    created_ns: int
    touched_ns: int
    next_seq: int = 1
    #: Every path this session's write_file calls have written.
    written: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_ns": self.created_ns,
            "touched_ns": self.touched_ns,
            "next_seq": self.next_seq,
            "written": list(self.written),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> SessionRecord:
        return SessionRecord(
            id=doc["id"],
            created_ns=int(doc["created_ns"]),
            touched_ns=int(doc["touched_ns"]),
            next_seq=int(doc["next_seq"]),
            written=tuple(doc.get("written", ())),
        )

    def touched(self, now_ns: int) -> SessionRecord:
        return replace(self, touched_ns=now_ns)


def _batch_key(session: str, seq: int) -> bytes:
    return session.encode() + b"/" + seq.to_bytes(4, "big")


def put_batch(batch_writer: WriteBatch, batch: Batch) -> None:
    value = json.dumps(batch.to_json(), separators=(",", ":")).encode()
    batch_writer.put("batches", _batch_key(batch.session, batch.seq), value)


def get_batch(view: ReadView, session: str, seq: int) -> Batch | None:
    raw = view.get("batches", _batch_key(session, seq))
    return None if raw is None else Batch.from_json(json.loads(raw))


def session_batches(view: ReadView, session: str) -> list[Batch]:
    """A session's batches in sequence order."""
    prefix = session.encode() + b"/"
    return [Batch.from_json(json.loads(v)) for _, v in view.items("batches", prefix)]


def delete_session_batches(batch_writer: WriteBatch, session: str) -> int:
    prefix = session.encode() + b"/"
    keys = [k for k, _ in batch_writer.items("batches", prefix)]
    for key in keys:
        batch_writer.delete("batches", key)
    return len(keys)


def put_session(batch_writer: WriteBatch, record: SessionRecord) -> None:
    value = json.dumps(record.to_json(), separators=(",", ":")).encode()
    batch_writer.put("sessions", record.id.encode(), value)


def get_session(view: ReadView, session: str) -> SessionRecord | None:
    raw = view.get("sessions", session.encode())
    return None if raw is None else SessionRecord.from_json(json.loads(raw))


def all_sessions(view: ReadView) -> list[SessionRecord]:
    return [SessionRecord.from_json(json.loads(v)) for _, v in view.items("sessions")]
