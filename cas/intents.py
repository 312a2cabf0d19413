"""Intents: what a mutating operation is about to do, committed before it starts.

A batch, an undo, a redo or a restore first commits an intent (its kind, the
state it starts from, what it needs to finish) and removes it in the very
transaction that records its end. A kill at any instant in between leaves the
intent in the store: the next command finds it, reports it and finishes the
operation (the agent layer's recovery).

The owner holds an ``flock`` on ``intents/<id>`` while it runs. The kernel
drops the lock when the process dies, however it dies, so an intent whose
lock can be taken is one whose owner is gone (``claim``). The same file
carries the owner's progress notes, one JSON line each (the process group of
a running command, each file written): appended without fsync, they survive
a kill; a power cut may lose the last ones, which costs attribution, never
data (see the agent layer's recovery rules).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import faults, schema
from .backend import Backend, ReadView, WriteBatch
from .procs import alive
from .sealed import CorruptRecord, seal_json, unseal_json


@dataclass(frozen=True, slots=True)
class Intent:
    """An operation that started and has not ended (yet, or ever)."""

    id: str
    kind: str
    started_ns: int
    pid: int
    #: What the kind needs to finish: its own fields.
    doc: dict[str, Any]
    #: A process (pid, start time) whose life keeps the intent live when no
    #: one holds its lock; None: only the lock's owner does.
    holder: tuple[int, int | None] | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "id": self.id,
            "kind": self.kind,
            "started_ns": self.started_ns,
            "pid": self.pid,
            "doc": self.doc,
        }
        if self.holder is not None:
            doc["holder"] = list(self.holder)
        return doc

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Intent:
        if not isinstance(doc, dict):
            raise CorruptRecord("intent ?", "sealed, but not a JSON object")
        try:
            holder = doc.get("holder")
            return Intent(
                str(doc["id"]),
                str(doc["kind"]),
                int(doc["started_ns"]),
                int(doc["pid"]),
                dict(doc["doc"]),
                None if holder is None else (int(holder[0]), _opt_int(holder[1])),
            )
        # IndexError: a holder of no items; OverflowError: a pid of 1e999.
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise CorruptRecord(f"intent {doc.get('id', '?')}", f"missing field {exc}") from None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def holder_alive(intent: Intent) -> bool:
    """Whether the intent's holder process still runs (False: it has none)."""
    return intent.holder is not None and alive(*intent.holder)


def read_intents(view: ReadView) -> tuple[list[Intent], list[tuple[str, CorruptRecord]]]:
    """Every sound intent in the store, oldest first; and each damaged one's id and error."""
    out: list[Intent] = []
    damaged: list[tuple[str, CorruptRecord]] = []
    for ident, key, value in schema.intent_records(view):
        try:
            out.append(Intent.from_json(unseal_json(key, value, f"intent {ident}")))
        except CorruptRecord as exc:
            damaged.append((ident, exc))
    return sorted(out, key=lambda i: (i.started_ns, i.id)), damaged


def put_intent(txn: WriteBatch, intent: Intent) -> None:
    schema.put_intent_record(
        txn, intent.id, seal_json(schema.intent_key(intent.id), intent.to_json())
    )


def end_intent(txn: WriteBatch, intent: Intent) -> None:
    """Remove the intent, in the transaction that records the operation's end."""
    schema.delete_intent_record(txn, intent.id)


#: The first note of every intent's notes (``Intents.new``): notes without it
#: were cut short.
OPENED = "opened"
#: The note that says an intent's notes are not as written (``read_notes``,
#: ``Intents.take``): whoever reads them must not trust what they say, nor
#: what they leave out.
DAMAGED = "damaged"


def _lost(path: Path) -> Path:
    return path.with_name(f"{path.name}.incomplete")


_NOTES_FLAGS = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_notes(path: Path, *, create: bool) -> int:
    """Open an intent's notes to lock and append to them; FileNotFoundError when
    absent and not ``create``. Notes that are not a regular file (a link is
    never followed, a FIFO never waited on) are set aside, and new notes begun
    that say so: whoever records the operation must not trust them."""
    try:
        fd = os.open(path, _NOTES_FLAGS | (os.O_CREAT if create else 0), 0o600)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise
        fd = -1
    if fd >= 0 and stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    if fd >= 0:
        os.close(fd)
    os.replace(path, path.with_name(f"{path.name}.not-a-file-{time.time_ns():x}"))
    return _begin_damaged(path, "the notes were not a regular file (set aside)")


def _begin_damaged(path: Path, why: str) -> int:
    fd = os.open(path, _NOTES_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
    line = json.dumps({DAMAGED: why}).encode() + b"\n"
    with contextlib.suppress(OSError):
        os.write(fd, line)
    return fd


def append_note(
    path: Path,
    fields: dict[str, Any],
    make_room: Callable[[], bool] | None = None,
    *,
    fd: int | None = None,
) -> None:
    """Append a note an operation cannot do without to its notes at ``path`` (or the
    open ``fd`` of them); OSError when it cannot be written. On a full disk
    ``make_room()`` (the store's reserve given back) is tried once. A note lost
    (a torn line would take the next one with it) marks the intent *incomplete*
    (``Held.incomplete``): whoever records its operation must not trust the notes."""
    line = json.dumps(fields, separators=(",", ":")).encode() + b"\n"
    own = fd is None
    try:
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        view = memoryview(line)  # what is left to write: a retry goes on, never restarts
        for attempt in (0, 1):
            try:
                faults.point("intent-note")
                while view:
                    view = view[os.write(fd, view) :]
                return
            except OSError as exc:
                full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
                if attempt == 0 and full and make_room is not None and make_room():
                    continue
                with contextlib.suppress(OSError):
                    os.close(os.open(_lost(path), os.O_WRONLY | os.O_CREAT, 0o600))
                raise
    finally:
        if own and fd is not None:
            os.close(fd)


def read_notes(path: Path) -> list[dict[str, Any]]:
    """The progress notes in ``path``, one JSON object a line; a torn last line is dropped.

    Notes that are not a regular file (a link, a FIFO: never followed, never
    waited on), or hold a line that is not a JSON object before the last,
    end with a ``{DAMAGED: why}`` note.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [{DAMAGED: f"the notes cannot be opened: {exc.strerror}"}]
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return [{DAMAGED: "the notes are not a regular file"}]
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError as exc:
        return [{DAMAGED: f"the notes cannot be read: {exc.strerror}"}]
    finally:
        os.close(fd)
    out: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines):
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past what json reads
            doc = None
        if isinstance(doc, dict):
            out.append(doc)
        elif line.strip() and number < len(lines) - 1:
            out.append({DAMAGED: f"line {number + 1} of the notes is not a note"})
    return out


class Held:
    """An intent this process owns: begun here, or claimed from a dead owner."""

    def __init__(self, intent: Intent, fd: int, path: Path) -> None:
        #: Settable until committed (the owner fills in what the commit decides).
        self.intent = intent
        self._fd = fd
        self._path = path

    @property
    def id(self) -> str:
        return self.intent.id

    def note(self, **fields: Any) -> None:
        """Append a progress note (one JSON line; survives a kill of this process)."""
        line = json.dumps(fields, separators=(",", ":")).encode() + b"\n"
        with contextlib.suppress(OSError):  # a full disk costs the note, not the operation
            os.write(self._fd, line)

    def note_or_raise(self, make_room: Callable[[], bool] | None = None, **fields: Any) -> None:
        """Append a note the operation cannot do without (``append_note``)."""
        append_note(self._path, fields, make_room, fd=self._fd)

    @property
    def incomplete(self) -> bool:
        """Whether a note the operation needed could not be written (``note_or_raise``)."""
        return os.path.exists(_lost(self._path))

    def mark_incomplete(self) -> None:
        """Say the notes cannot be trusted (``incomplete``): they were found damaged."""
        with contextlib.suppress(OSError):
            os.close(os.open(_lost(self._path), os.O_WRONLY | os.O_CREAT, 0o600))

    def notes(self) -> list[dict[str, Any]]:
        """The notes written so far, by this owner or a dead one (a torn last line is dropped)."""
        return read_notes(self._path)

    def release(self) -> None:
        """After the end was committed (or the intent proved gone): drop the file and lock."""
        if self._fd < 0:
            return
        faults.point("intent-release")  # committed, its notes still there
        for path in (self._path, _lost(self._path)):
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.close()

    def close(self) -> None:
        """Give the intent up unfinished: the lock goes, the notes stay for whoever finishes it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Intents:
    """The intents of one store, and the lock files that tell a live owner from a dead one."""

    def __init__(self, backend: Backend, directory: Path) -> None:
        self.backend = backend
        self.directory = directory

    def _path(self, intent_id: str) -> Path:
        return self.directory / intent_id

    def notes(self, intent: Intent) -> list[dict[str, Any]]:
        """An intent's progress notes so far, without taking it over."""
        return read_notes(self._path(intent.id))

    def pending(self) -> list[Intent]:
        """Every sound intent in the store, oldest first, whether its owner lives or not."""
        with self.backend.read() as view:
            return read_intents(view)[0]

    def damaged(self) -> list[tuple[str, CorruptRecord]]:
        """The intents whose records are damaged: no one can finish them."""
        with self.backend.read() as view:
            return read_intents(view)[1]

    def set_aside(self) -> list[str]:
        """Move damaged intents out of the store (``fsck --repair``); return their ids.

        Each record's bytes are kept in ``intents/damaged-<id>`` for a look by
        hand. What the operation had changed stays on disk; the next full
        restage records it, outside any batch.
        """
        with self.backend.read() as view:
            bad = {ident: schema.get_intent(view, ident) for ident, _ in read_intents(view)[1]}
        if not bad:
            return []
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for ident, raw in bad.items():
            (self.directory / f"damaged-{ident}").write_bytes(bytes(raw or b""))
        with self.backend.write() as txn:
            for ident in bad:
                schema.delete_intent_record(txn, ident)
        for ident in bad:
            with contextlib.suppress(OSError):
                self._path(ident).unlink()
        return sorted(bad)

    def new(
        self, kind: str, doc: dict[str, Any], holder: tuple[int, int | None] | None = None
    ) -> Held:
        """An intent owned by this process, locked but not yet committed.

        The caller commits it with ``put_intent`` (alone, or in the
        transaction that records the state it starts from), and ends it with
        ``end_intent`` in the transaction that records its end. ``holder``:
        a process whose life keeps it live once this one lets go of it.
        """
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        intent_id = f"{time.time_ns():x}-{os.urandom(4).hex()}"
        path = self._path(intent_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        # The first line, before the intent is committed: notes of a committed
        # intent that lack it were cut short, not merely not written yet. A
        # failed write (a full disk) leaves them looking cut short: they are
        # then trusted for nothing, the safe way round.
        with contextlib.suppress(OSError):
            os.write(fd, json.dumps({OPENED: intent_id}).encode() + b"\n")
        return Held(Intent(intent_id, kind, time.time_ns(), os.getpid(), doc, holder), fd, path)

    def begin(self, kind: str, doc: dict[str, Any]) -> Held:
        """``new`` and commit it at once: the operation may start when this returns."""
        held = self.new(kind, doc)
        try:
            with self.backend.write() as txn:
                put_intent(txn, held.intent)
        except BaseException:
            held.release()
            raise
        return held

    def is_live(self, intent: Intent) -> bool:
        """Whether the intent's owner is still running (its lock is held, or its holder lives)."""
        if holder_alive(intent):
            return True
        try:
            fd = os.open(self._path(intent.id), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False  # gone, or not a file: no one holds it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def claim(self, intent: Intent) -> Held | None:
        """Take over an intent whose owner is gone; None if it lives or has ended."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(intent.id)
        fd = _open_notes(path, create=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # Checked under the lock: a process acting for the holder takes the
        # lock first, so it cannot be mistaken for an abandoned intent.
        if holder_alive(intent):
            os.close(fd)
            return None
        return self._still_pending(Held(intent, fd, path))

    def take(self, intent: Intent) -> Held | None:
        """Work on an intent for its holder: wait for its lock; None if it has ended.

        The intent stays live between two such processes while its holder
        lives; a process that is done with it for now gives it up with
        ``Held.close``.
        """
        path = self._path(intent.id)
        try:
            fd = _open_notes(path, create=False)
        except FileNotFoundError:
            # Ended (release removes the file), finished by another, or the
            # notes were deleted while it is pending: then new ones say so.
            try:
                fd = _begin_damaged(path, "the notes were deleted")
            except FileExistsError:
                return self.take(intent)  # made meanwhile: by whoever, take them
        fcntl.flock(fd, fcntl.LOCK_EX)
        return self._still_pending(Held(intent, fd, path))

    def _still_pending(self, held: Held) -> Held | None:
        # Under the lock: another process may have finished it meanwhile.
        with self.backend.read() as view:
            still = schema.get_intent(view, held.id) is not None
        if not still:
            held.release()
            return None
        return held

    def drop(self, held: Held) -> None:
        """Remove an intent that needs no finishing (its operation proved to have done nothing)."""
        with self.backend.write() as txn:
            end_intent(txn, held.intent)
        held.release()
