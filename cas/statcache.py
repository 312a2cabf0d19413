"""The stat cache: what each directory held at the last full scan.

One record per directory, keyed by a digest of its path: the ignore-rule
fingerprint, the tree digest it produced, and per entry a key of
(kind, mode, size, mtime_ns, ctime_ns, ino) with its digest. A file whose
stat key matches is not read again; a directory whose entries all match
reuses its tree digest without encoding anything.

Racy entries (mtime or ctime not safely older than the scan's start marker)
are stored "smudged" (mtime -1), so they never match and are hashed again next
time, as git does. Records are a cache, not a canonical encoding: they use
``marshal`` (fast, C) with a version tag, and any record that fails to load is
simply treated as absent.
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass

import blake3

from .backend import ReadView, WriteBatch

#: 3: records written by versions that could commit a record naming an object
#: still in flight (a kill then left it dangling) are dropped, not trusted.
_VERSION = 3
TABLE = "statcache"

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


def record_key(rel: str) -> bytes:
    return blake3.blake3(rel.encode("utf-8", "surrogateescape")).digest()[:16]


def load_record(view: ReadView, rel: str) -> DirRecord | None:
    raw = view.get(TABLE, record_key(rel))
    if raw is None:
        return None
    record = decode_record(raw)
    return record if record is not None and record.rel == rel else None


def decode_record(raw: bytes) -> DirRecord | None:
    """A stored record, or None for one of another version or that fails to load."""
    try:
        version, stored_rel, fingerprint, tree, entries, dir_mtime, ignore_files = marshal.loads(
            raw
        )
    except (ValueError, EOFError, TypeError):
        return None
    if version != _VERSION:
        return None
    return DirRecord(stored_rel, fingerprint, tree, entries, dir_mtime, tuple(ignore_files))


def store_record(batch: WriteBatch, record: DirRecord) -> None:
    fields = (record.rel, record.fingerprint, record.tree, record.entries)
    value = marshal.dumps((_VERSION, *fields, record.dir_mtime, record.ignore_files))
    batch.put(TABLE, record_key(record.rel), value)
