"""What a batch is: its kind, its calls, and its ledger of path states before and after.

Values only, with their JSON form; where they are kept is ``records``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from earshot.cas.digest import Digest
from earshot.cas.tree import Ident, Kind, TreeEntry


@dataclass(frozen=True, slots=True)
class State:
    """What a path held.

    A file or symlink: kind, permission bits, content digest. A directory
    (only one that appeared or vanished empty, or changed mode, is a ledger
    line of its own): kind and bits. A path present but *not recorded*
    (over the size limit, unreadable, a FIFO or device, ignored and not
    kept): kind ``UNRECORDED`` with its reason, size and identity (``ident``:
    its inode, and a file's mtime), and no digest. A path inside such a
    directory: ``UNRECORDED`` with that directory's reason and its path
    (``under``); whether it was there is not known. Neither is "absent":
    undo never deletes or overwrites a path whose state it does not hold.
    """

    kind: Kind
    mode: int
    digest: Digest | None
    #: For an unrecorded path: why (``too_large``, ``ignored``, ``cache``, ...).
    reason: str | None = None
    size: int = 0
    ident: Ident | None = None
    #: For a path inside an unrecorded directory: that directory.
    under: str | None = None

    @staticmethod
    def of(entry: TreeEntry | None) -> State | None:
        if entry is None:
            return None
        if entry.kind is Kind.DIR:
            return State(Kind.DIR, entry.mode, None)
        if entry.kind is Kind.UNRECORDED:
            why = entry.reason.name.lower() if entry.reason is not None else "unrecorded"
            return State(Kind.UNRECORDED, entry.mode, None, why, entry.size, entry.ident)
        return State(entry.kind, entry.mode, entry.digest)

    @staticmethod
    def inside(directory: str, state: State) -> State:
        """The state of a path inside the unrecorded directory ``directory`` (``state``)."""
        return State(Kind.UNRECORDED, 0, None, state.reason, 0, None, directory)

    @property
    def recorded(self) -> bool:
        """Whether earshot holds this state (can compare it, and bring it back)."""
        return self.kind is not Kind.UNRECORDED

    @property
    def is_dir(self) -> bool:
        """A directory, recorded or not."""
        return self.kind is Kind.DIR or (self.ident is not None and self.ident.is_dir)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "kind": self.kind.name.lower(),
            "mode": self.mode,
            "digest": self.digest.hex() if self.digest is not None else None,
        }
        if self.reason is not None:
            doc["reason"] = self.reason
            doc["size"] = self.size
        if self.ident is not None:
            doc["ident"] = [self.ident.ino, self.ident.mtime_ns, self.ident.is_dir]
        if self.under is not None:
            doc["under"] = self.under
        return doc

    @staticmethod
    def from_json(doc: dict[str, Any] | None) -> State | None:
        if doc is None:
            return None
        digest = doc.get("digest")
        kind = Kind[doc["kind"].upper()]
        if kind in (Kind.FILE, Kind.SYMLINK) and not digest:
            raise ValueError(f"a {kind.name.lower()} state without a digest")
        ident = doc.get("ident")
        under = doc.get("under")
        return State(
            kind,
            int(doc["mode"]),
            Digest(bytes.fromhex(digest)) if digest else None,
            doc.get("reason"),
            int(doc.get("size", 0)),
            Ident(int(ident[0]), int(ident[1]), bool(ident[2])) if ident is not None else None,
            str(under) if under is not None else None,
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
    #: A batch of another session ran at the same time on this root: this
    #: change may be its. Undo deletes an ambiguous creation only with --force.
    ambiguous: bool = False
    #: Where the entry at this path went by a rename (an undo's move back):
    #: the redo of that undo moves it here again.
    moved: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "path": self.path,
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
            "by": self.by,
        }
        if self.ambiguous:
            doc["ambiguous"] = True
        if self.moved is not None:
            doc["moved"] = self.moved
        return doc

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Change:
        moved = doc.get("moved")
        return Change(
            doc["path"],
            State.from_json(doc["before"]),
            State.from_json(doc["after"]),
            doc["by"],
            bool(doc.get("ambiguous", False)),
            str(moved) if moved is not None else None,
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
    #: Recorded by a later command: the process running it died (a kill, a
    #: full disk) after the state before it was recorded (see recovery).
    interrupted: bool = False
    #: The conversation log's leaf when the batch began: where it hangs in the
    #: conversation even if its link in the log was lost.
    anchor: str | None = None
    #: How many ledger lines it has, when read without them (``ledgers=False``);
    #: -1: the ledger itself is here.
    changes: int = -1

    @property
    def changed(self) -> bool:
        return self.changes > 0 if self.changes >= 0 else bool(self.ledger)

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
            "interrupted": self.interrupted,
            "anchor": self.anchor,
        }

    @staticmethod
    def from_json(doc: dict[str, Any], ledger: bool = True) -> Batch:
        """A batch from its record; without ``ledger`` its lines are only counted
        (a ledger of 50,000 paths takes a second to turn into objects)."""

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
            ledger=tuple(Change.from_json(c) for c in doc["ledger"]) if ledger else (),
            changes=-1 if ledger else len(doc["ledger"]),
            folded=bool(doc.get("folded", False)),
            targets=tuple(doc.get("targets", ())),
            undone_by=doc.get("undone_by"),
            redone_by=doc.get("redone_by"),
            interrupted=bool(doc.get("interrupted", False)),
            anchor=doc.get("anchor"),
        )
