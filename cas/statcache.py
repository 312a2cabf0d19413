"""The stat cache: what each directory held at the last full scan.

One record per directory, keyed by a digest of its path: the ignore-rule
fingerprint, the tree digest it produced, and per entry a key of
(kind, mode, size, mtime_ns, ctime_ns, ino) with its digest. A file whose
stat key matches is not read again; a directory whose entries all match
reuses its tree digest without encoding anything.

A directory whose outcome depended on a git index (it held a name the
ignore rules matched: whether to record it is the index's call) keeps the
index file's identity; the record holds only while the index is the same.

Racy entries (mtime or ctime not safely older than the scan's start marker)
are stored "smudged" (mtime -1), so they never match and are hashed again next
time, as git does. Records are a cache, not a canonical encoding: they use
``marshal`` (fast, C) with a version tag and end with a checksum (BLAKE3,
16 bytes); any record that fails to load or to match is simply treated as
absent: its directory is read again.

The same table keeps the paths last read from each git index, under the
index file's identity (:class:`StoredPaths`): a later process whose scan
meets a new ignored name asks the store, not the index (78,346 paths of a
kernel tree: 47-90 ms to parse, about 1 ms to load). Such a value starts with a
NUL, which no marshal stream does: ``decode_record`` sees no record in it.
"""

from __future__ import annotations

import marshal
import os
from dataclasses import dataclass

import blake3

from . import schema
from .backend import ReadView, WriteBatch
from .gitindex import PathsCache

#: 4: records carry the git index identity they depend on. Records of
#: versions 2 and 3 are dropped, not trusted: those versions could commit a
#: record naming an object still in flight (a kill then left it dangling).
#: 5: each record ends with a checksum. A flipped byte in a record could
#: otherwise load as another digest for an unchanged file, and the next
#: snapshot would name content the file never had.
_VERSION = 5
_CHECK_SIZE = 16

#: (kind, mode, size, mtime_ns, ctime_ns, ino, digest-or-None, reason-or-0)
EntryKey = tuple[int, int, int, int, int, int, bytes | None, int]

SMUDGED = -1


@dataclass(slots=True)
class DirRecord:
    """What one directory held at the last full scan."""

    rel: str
    fingerprint: bytes
    tree: bytes
    entries: dict[str, EntryKey]
    #: The directory's own mtime when listed (SMUDGED if too recent to trust):
    #: unchanged, the names are unchanged and the listing need not be read.
    dir_mtime: int = SMUDGED
    #: Which ignore files the listing held (they shape the rules below).
    ignore_files: tuple[str, ...] = ()
    #: The identity of the git index the listing's outcome depended on; b""
    #: when no name in it was ignored (the index could change nothing).
    index_tag: bytes = b""


def load_record(view: ReadView, rel: str) -> DirRecord | None:
    raw = schema.get_dir_record(view, rel)
    if raw is None:
        return None
    record = decode_record(raw)
    return record if record is not None and record.rel == rel else None


def decode_record(raw: bytes) -> DirRecord | None:
    """A stored record, or None for one of another version, damaged, or that fails to load."""
    body, check = raw[:-_CHECK_SIZE], raw[-_CHECK_SIZE:]
    if raw[:1] == b"\0" or blake3.blake3(body).digest(_CHECK_SIZE) != check:
        return None  # index paths (below), a record of version 4 or older, or damage
    try:
        version, stored_rel, fingerprint, tree, entries, dir_mtime, ignore_files, *rest = (
            marshal.loads(body)
        )
        if version != _VERSION or len(rest) != 1:
            return None
        index_tag = rest[0]
        # Inside the try: a record whose checksum matches may still hold other
        # shapes (ignore files that are not a sequence).
        return DirRecord(
            stored_rel, fingerprint, tree, entries, dir_mtime, tuple(ignore_files), index_tag
        )
    except (ValueError, EOFError, TypeError):
        return None


def store_record(batch: WriteBatch, record: DirRecord) -> None:
    fields = (record.rel, record.fingerprint, record.tree, record.entries)
    value = marshal.dumps(
        (_VERSION, *fields, record.dir_mtime, record.ignore_files, record.index_tag)
    )
    schema.put_dir_record(batch, record.rel, value + blake3.blake3(value).digest(_CHECK_SIZE))


_PATHS_MAGIC = b"\0earshot.index-paths/1\0"
_IDENTITY_SIZE = 32


class StoredPaths(PathsCache):
    """Index paths kept in the store as well as in memory, for the next process.

    An index written at or after ``trust_before_ns`` is not kept in the store:
    another write within the same time stamp tick could leave its stat as it
    is (the racy rule, as for files).
    """

    def __init__(self, view: ReadView, batch: WriteBatch, trust_before_ns: int) -> None:
        super().__init__()
        self.view = view
        self.batch = batch
        self.trust_before_ns = trust_before_ns

    def get(self, index_path: str, identity: bytes) -> list[bytes] | None:
        paths = super().get(index_path, identity)
        if paths is not None:
            return paths
        raw = schema.get_index_paths(self.view, os.fsencode(index_path))
        if raw is None or not raw.startswith(_PATHS_MAGIC):
            return None
        body = bytes(raw[len(_PATHS_MAGIC) :])
        if body[:_IDENTITY_SIZE] != identity.ljust(_IDENTITY_SIZE, b"\0"):
            return None
        listed = body[_IDENTITY_SIZE:]
        paths = listed.split(b"\0") if listed else []
        super().put(index_path, identity, paths, 0)
        return paths

    def put(self, index_path: str, identity: bytes, paths: list[bytes], newest_ns: int) -> None:
        super().put(index_path, identity, paths, newest_ns)
        if newest_ns < self.trust_before_ns:
            value = _PATHS_MAGIC + identity.ljust(_IDENTITY_SIZE, b"\0") + b"\0".join(paths)
            schema.put_index_paths(self.batch, os.fsencode(index_path), value)
