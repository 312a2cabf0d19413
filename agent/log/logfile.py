"""One session file on disk: the write queue, incremental reading, durable writes.

Concurrency. Writes go through ``SessionFile.writing()``: an in-process lock,
then an exclusive ``flock`` on the file; under both, the handle reads whatever
other processes appended since its last read (it tracks the byte offset), so
it knows the true leaf before it picks a parent. Appends from threads and
processes therefore form one chain. Each batch of lines is one ``os.write``
on an ``O_APPEND`` descriptor. Readers take a shared ``flock``, so they never
see half a line from a live writer; what they do see without a newline is a
torn write from a crash.

Torn writes. The next write seals a torn tail off: it writes a newline if
the fragment lacks one, then a ``repair`` entry naming the fragment's offset,
so the fragment is an acknowledged line the loader skips. Nothing is
rewritten.

Durability (fsync policy). A new file (a header, or a fork's whole copy) is
written aside, fsynced, renamed into place and its directory fsynced: a
session exists whole or not at all. Navigation entries, checkpoint batch
links and torn-write repairs are fsynced before the write returns: losing one
would silently revive an abandoned branch, or unlink code from conversation
after the checkpoint layer has acted on it. Messages are not fsynced unless
``sync_every_append`` is set: an fsync per message costs milliseconds on real
disks, a power cut then loses at most the last messages, and a half-written
line is a torn tail that loading ignores.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from earshot.agent.log.entries import (
    KNOWN_TYPES,
    RESERVED_FIELDS,
    BatchLink,
    Body,
    Compaction,
    Entry,
    Label,
    Navigation,
    OtherEntry,
    Repair,
    decode_entry,
    encode_entry,
    now_ts,
)
from earshot.agent.log.fields import EntryFormatError
from earshot.agent.log.fileio import SessionCorrupt, gc_paused, open_session_fd, pread_all
from earshot.agent.log.header import ForkOrigin, Header, decode_header, encode_header
from earshot.agent.log.ids import EntryId, SessionId, new_entry_id, new_session_id
from earshot.agent.log.scan import TornTail, scan
from earshot.agent.log.tree import SessionTree, TreeError
from earshot.cas import faults
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger

log = get_logger("earshot.agent.session")

# Entries fsynced before the write returns (see the module docstring).
_SYNCED = (Navigation, BatchLink)


class SessionNotFound(EarshotError):
    """No session file at a path."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"no session file at {path}")
        self.path = path


class InvalidEntry(EarshotError):
    """An entry refused before anything was written."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ShortWrite(EarshotError):
    """The disk took only part of a write (full?); the fragment is a torn tail."""

    def __init__(self, path: Path, written: int, expected: int) -> None:
        super().__init__(f"{path}: wrote {written} of {expected} bytes; is the disk full?")
        self.path = path
        self.written = written
        self.expected = expected


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SessionExists(EarshotError):
    """A session file with the id asked for is already there."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"a session file already exists at {path}")
        self.path = path


def write_new_file(
    directory: Path,
    root: str,
    fork_of: ForkOrigin | None,
    entries: Sequence[Entry],
    session_id: SessionId | None = None,
) -> Path:
    """A complete new session file, or none: written aside, fsynced, renamed in.

    ``session_id`` names a session whose id was made elsewhere (its checkpoint
    side); then an existing file of that id is never replaced (``SessionExists``),
    even by a concurrent creator.
    """
    directory.mkdir(parents=True, exist_ok=True)
    header = Header(session_id or new_session_id(), root, now_ts(), fork_of=fork_of)
    data = encode_header(header) + b"".join(encode_entry(e) for e in entries)
    final = directory / f"{header.id}.jsonl"
    # A given id may be created by two processes at once: each its own temp file.
    tag = f".{secrets.token_hex(4)}" if session_id is not None else ""
    temp = directory / f".{header.id}{tag}.jsonl.tmp"
    # 0o600: a conversation may quote secrets.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if session_id is None:
        os.rename(temp, final)  # a fresh id: nothing to replace
    else:
        try:
            os.link(temp, final)  # fails rather than replace a file with entries
        except FileExistsError:
            raise SessionExists(final) from None
        finally:
            os.unlink(temp)
    _fsync_dir(directory)
    return final


class SessionFile:
    """The tree of one session file, kept in step with the file."""

    def __init__(self, path: Path, *, sync_every_append: bool = False) -> None:
        """Load ``path``; ``SessionNotFound`` or ``SessionCorrupt`` if it is not a session."""
        self.path = path
        self.sync_every_append = sync_every_append
        self.tree = SessionTree()
        self._lock = threading.RLock()
        self._held_fd: int | None = None
        self._header: Header | None = None
        self._offset = 0  # end of the last line read (the torn tail's start, if any)
        self._line = 1  # number of the line at _offset
        self._torn: TornTail | None = None
        self._warned_torn: int | None = None
        self.refresh()

    @property
    def header(self) -> Header:
        assert self._header is not None  # __init__ raised otherwise
        return self._header

    @property
    def torn(self) -> TornTail | None:
        return self._torn

    def refresh(self) -> None:
        """Read what was appended since the last read, by anyone."""
        with self._lock:
            if self._held_fd is not None:
                return  # inside the write queue: already caught up
            if self._header is not None:
                # Append-only: an unchanged size means nothing new, no lock needed.
                known = self._offset + (self._torn.size if self._torn is not None else 0)
                try:
                    if os.stat(self.path).st_size == known:
                        return
                except FileNotFoundError:
                    raise SessionNotFound(self.path) from None
            try:
                fd = open_session_fd(self.path, os.O_RDONLY)
            except FileNotFoundError:
                raise SessionNotFound(self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                self._catch_up(fd)
            finally:
                os.close(fd)

    @contextmanager
    def reading(self) -> Iterator[SessionTree]:
        """The tree, up to date, kept still while the caller reads it."""
        with self._lock:
            self.refresh()
            yield self.tree

    @contextmanager
    def writing(self) -> Iterator[SessionTree]:
        """The write queue: the tree, up to date, while no one else may append."""
        with self._lock:
            if self._held_fd is not None:
                yield self.tree
                return
            try:
                fd = open_session_fd(self.path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                raise SessionNotFound(self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._catch_up(fd)
                self._held_fd = fd
                try:
                    yield self.tree
                finally:
                    self._held_fd = None
            finally:
                os.close(fd)  # releases the flock

    def write(self, bodies: Sequence[Body]) -> tuple[Entry, ...]:
        """Append ``bodies`` as a chain from the leaf; only inside ``writing()``."""
        fd = self._held_fd
        assert fd is not None, "write() outside writing()"
        tree = self.tree
        leaf = tree.leaf
        ts = now_ts()
        torn = self._torn
        parts: list[bytes] = []
        written: list[Entry] = []
        if torn is not None:
            if not torn.terminated:
                parts.append(b"\n")  # the fragment becomes a line of its own
            written.append(Entry(new_entry_id(), leaf, ts, Repair(torn.offset, torn.line)))
        pending: dict[EntryId, Entry] = {}
        for body in bodies:
            self._check(body, leaf, pending)
            entry = Entry(new_entry_id(), leaf, ts, body)
            pending[entry.id] = entry
            written.append(entry)
            if isinstance(body, Navigation):
                leaf = body.target
            elif entry.is_node:
                leaf = entry.id
        parts.extend(encode_entry(e) for e in written)
        data = b"".join(parts)
        if faults.armed("log-write"):  # a crash test's torn line: half of it, then the kill
            os.write(fd, data[: len(data) // 2])
        faults.point("log-write")
        count = os.write(fd, data)
        if count != len(data):
            raise ShortWrite(self.path, count, len(data))
        if (
            torn is not None
            or self.sync_every_append
            or any(isinstance(b, _SYNCED) for b in bodies)
        ):
            os.fsync(fd)
        for entry in written:
            tree.add(entry)
        self._offset += (torn.size if torn is not None else 0) + len(data)
        self._line = (torn.line + torn.lines if torn is not None else self._line) + len(written)
        self._torn = None
        return tuple(written[1:] if torn is not None else written)

    def _catch_up(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        torn_size = self._torn.size if self._torn is not None else 0
        if size == self._offset + torn_size and self._header is not None:
            return
        if size < self._offset:
            raise SessionCorrupt(self.path, None, f"the file shrank below {self._offset} bytes")
        with gc_paused(size - self._offset):
            self._read_records(fd, size)
        torn = self._torn
        if self._header is None:
            raise SessionCorrupt(self.path, 1, "no session header")
        if torn is not None and self._warned_torn != torn.offset:
            self._warned_torn = torn.offset
            log.warning(
                "session_torn_tail",
                path=str(self.path),
                line=torn.line,
                bytes=torn.size,
                note="ignored; the next append starts on a fresh line",
            )

    def _read_records(self, fd: int, size: int) -> None:
        data = pread_all(fd, size - self._offset, self._offset)
        result = scan(data, self._offset, self._line)
        if result.corrupt:
            raise SessionCorrupt(self.path, result.corrupt[0].line, "not a JSON object")
        tree = self.tree
        for record in result.records:
            try:
                if record.line == 1:
                    self._header = decode_header(record.obj)
                elif self._header is None:
                    raise SessionCorrupt(self.path, 1, "no session header")
                else:
                    tree.add(decode_entry(record.obj))
            except (EntryFormatError, TreeError) as err:
                raise SessionCorrupt(self.path, record.line, err.reason) from None
            # Advance per record, so a bad record fails the same way next time.
            self._offset = record.end
            self._line = record.line + 1
        self._offset = result.next_offset
        self._line = result.next_line
        self._torn = result.torn

    def _check(self, body: Body, leaf: EntryId | None, pending: dict[EntryId, Entry]) -> None:
        entries = self.tree.entries

        def node(ident: EntryId) -> bool:
            entry = pending.get(ident) or entries.get(ident)
            return entry is not None and entry.is_node

        if isinstance(body, Repair):
            raise InvalidEntry("repair entries are written by the log itself")
        if isinstance(body, Navigation) and body.target is not None and not node(body.target):
            raise InvalidEntry(f"navigation target {body.target} is not an entry here")
        if isinstance(body, Label) and not node(body.target):
            raise InvalidEntry(f"label target {body.target} is not an entry here")
        if isinstance(body, Compaction) and body.first_kept_id is not None:
            ident = leaf
            while ident is not None and ident != body.first_kept_id:
                found = pending.get(ident) or entries[ident]
                ident = found.parent_id
            if ident is None:
                raise InvalidEntry(f"first kept entry {body.first_kept_id} is not on the path")
        if isinstance(body, OtherEntry) and (
            body.type_name in KNOWN_TYPES or not RESERVED_FIELDS.isdisjoint(body.data)
        ):
            raise InvalidEntry(f"entry type {body.type_name!r} clashes with the format")
