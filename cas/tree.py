"""Trees: the listing of one directory, in a canonical binary encoding.

An encoded tree is ``b"T1"`` followed by its entries in strictly increasing
order of their name bytes; each entry is::

    uvarint(len(name)) name  kind:u8  uvarint(mode)  uvarint(size)  payload

where the payload is the 32-byte digest (files, symlinks, directories) or, for
an unrecorded entry, one reason byte, and when its identity is known (bit
``0x80`` of that byte; bit ``0x40``: it is a directory) the inode and the
modification time that identify it on disk::

    reason|flags:u8  [uvarint(inode)  uvarint(zigzag(mtime_ns))]

An unrecorded entry's content is not held, so its identity is what says that
it changed (a file rewritten in place gets a new mtime, a directory's
listing a new one) or moved (a rename keeps the inode and the mtime; a new
file or directory given a freed inode has a new mtime). One tree has exactly
one encoding, so equal
directories get equal digests and unchanged subtrees are shared between
snapshots.

Names are validated on decode as well as encode: a stored tree naming ``..``,
``.``, an empty name, or a name holding ``/`` or NUL is corrupt, and restore
refuses it before writing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from .digest import DIGEST_SIZE, Digest, tree_digest
from .errors import EarshotError
from .varint import Truncated, decode_uvarint, encode_uvarint

MAGIC = b"T1"


class Kind(IntEnum):
    """What a tree entry is."""

    FILE = 1
    SYMLINK = 2
    DIR = 3
    #: Present on disk but its content was not stored (too large, unreadable).
    #: Restore never writes, overwrites or deletes such a path.
    UNRECORDED = 4


class Unrecorded(IntEnum):
    """Why an entry's content was not stored."""

    TOO_LARGE = 1
    UNREADABLE = 2
    SPECIAL = 3
    #: A directory deeper than ``scan.MAX_DEPTH`` levels: kept, never walked.
    TOO_DEEP = 4
    #: Ignored by git's rules (``.gitignore``, ``info/exclude``) and not kept:
    #: a file over the limit for ignored files, or a directory over the budget.
    IGNORED = 5
    #: A regenerable cache directory (``node_modules``, a venv, a directory
    #: marked by ``CACHEDIR.TAG``, a tool's cache), ignored: never walked.
    CACHE = 6
    #: Excluded by an ``.earshotignore`` pattern: earshot's own "do not keep".
    EXCLUDED = 7
    #: An ignored build output: a compiled object, library or executable (by
    #: its first bytes), which the build makes again.
    BUILD = 8


#: Bits of an unrecorded entry's reason byte: its identity follows, and it is a directory.
_HAS_IDENT = 0x80
_IS_DIR = 0x40


@dataclass(frozen=True, slots=True)
class Ident:
    """What identifies an unrecorded entry on disk: its inode and its mtime.

    Equal identities on both sides of a batch mean the same file or
    directory: unchanged if at the same path, moved if at another.
    """

    ino: int
    mtime_ns: int = 0
    is_dir: bool = False


def _zigzag(value: int) -> int:
    return value * 2 if value >= 0 else -value * 2 - 1


def _unzigzag(value: int) -> int:
    return value // 2 if value % 2 == 0 else -(value + 1) // 2


class CorruptTree(EarshotError):
    """A stored tree that cannot be decoded or names a path restore must refuse."""

    def __init__(self, why: str) -> None:
        super().__init__(f"corrupt tree: {why}")
        self.why = why


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One name in a directory.

    ``digest`` is the blob (file content or link target) or subtree digest;
    ``None`` only for unrecorded entries, whose ``reason`` says why and
    whose ``ident`` (when known) says which inode it was.
    ``mode`` holds the permission bits (``st_mode & 0o7777``).
    """

    name: bytes
    kind: Kind
    mode: int
    size: int
    digest: Digest | None
    reason: Unrecorded | None = None
    ident: Ident | None = None


def check_name(name: bytes) -> None:
    """Refuse a name that could escape its directory or is not a single component."""
    if not name:
        raise CorruptTree("empty name")
    if name in (b".", b".."):
        raise CorruptTree(f"entry named {name.decode()!r}")
    if b"/" in name:
        raise CorruptTree(f"name with a slash: {name!r}")
    if b"\0" in name:
        raise CorruptTree(f"name with a NUL byte: {name!r}")


def encode_tree(entries: Iterable[TreeEntry]) -> bytes:
    """The canonical encoding of a directory listing (any input order)."""
    out = [MAGIC]
    previous: bytes | None = None
    for entry in sorted(entries, key=lambda e: e.name):
        check_name(entry.name)
        if entry.name == previous:
            raise CorruptTree(f"duplicate name {entry.name!r}")
        previous = entry.name
        if not 0 <= entry.mode <= 0o7777:
            raise CorruptTree(f"mode {entry.mode:o} of {entry.name!r}")
        out.append(encode_uvarint(len(entry.name)))
        out.append(entry.name)
        out.append(bytes((entry.kind,)))
        out.append(encode_uvarint(entry.mode))
        out.append(encode_uvarint(entry.size))
        if entry.kind is Kind.UNRECORDED:
            if entry.reason is None or entry.digest is not None:
                raise CorruptTree(f"unrecorded entry {entry.name!r} needs a reason, no digest")
            ident = entry.ident
            if ident is None:
                out.append(bytes((entry.reason,)))
            else:
                if ident.ino < 0:
                    raise CorruptTree(f"identity of {entry.name!r}")
                flags = _HAS_IDENT | (_IS_DIR if ident.is_dir else 0)
                out.append(bytes((entry.reason | flags,)))
                out.append(encode_uvarint(ident.ino))
                out.append(encode_uvarint(_zigzag(ident.mtime_ns)))
        else:
            if entry.digest is None or len(entry.digest) != DIGEST_SIZE:
                raise CorruptTree(f"entry {entry.name!r} without a digest")
            out.append(entry.digest)
    return b"".join(out)


_KINDS = {int(k): k for k in Kind}
_REASONS = {int(r): r for r in Unrecorded}


def decode_tree(data: bytes | memoryview) -> list[TreeEntry]:
    """Decode and validate an encoded tree; raise CorruptTree on any defect.

    The one-byte varint (names under 128 bytes, small modes) is decoded
    inline: large directories are decoded on every lookup through them.
    """
    data = bytes(data)
    if data[:2] != MAGIC:
        raise CorruptTree("bad magic")
    pos = 2
    end = len(data)
    entries: list[TreeEntry] = []
    previous: bytes | None = None
    try:
        while pos < end:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = decode_uvarint(data, pos)
            name = data[pos : pos + length]
            if len(name) != length:
                raise CorruptTree("truncated name")
            pos += length
            if not name or name == b"." or name == b".." or b"/" in name or b"\0" in name:
                check_name(name)  # raises, naming the defect
            if previous is not None and name <= previous:
                raise CorruptTree("entries out of order or duplicated")
            previous = name
            if pos >= end:
                raise CorruptTree("truncated entry")
            kind = _KINDS.get(data[pos])
            if kind is None:
                raise CorruptTree(f"unknown kind {data[pos]}")
            mode, pos = decode_uvarint(data, pos + 1)
            size = data[pos] if pos < end else 0x80
            if size < 0x80:
                pos += 1
            else:
                size, pos = decode_uvarint(data, pos)
            if mode > 0o7777:
                raise CorruptTree(f"mode {mode:o} of {name!r}")
            if kind is Kind.UNRECORDED:
                if pos >= end:
                    raise CorruptTree("truncated entry")
                byte = data[pos]
                reason = _REASONS.get(byte & ~(_HAS_IDENT | _IS_DIR))
                if reason is None or (byte & _IS_DIR and not byte & _HAS_IDENT):
                    raise CorruptTree(f"unknown reason {byte}")
                pos += 1
                ident = None
                if byte & _HAS_IDENT:
                    ino, pos = decode_uvarint(data, pos)
                    mtime, pos = decode_uvarint(data, pos)
                    ident = Ident(ino, _unzigzag(mtime), bool(byte & _IS_DIR))
                entries.append(TreeEntry(name, kind, mode, size, None, reason, ident))
            else:
                digest = data[pos : pos + DIGEST_SIZE]
                if len(digest) != DIGEST_SIZE:
                    raise CorruptTree("truncated digest")
                pos += DIGEST_SIZE
                entries.append(TreeEntry(name, kind, mode, size, Digest(digest)))
    except Truncated as exc:
        raise CorruptTree(str(exc)) from None
    return entries


def hash_tree(entries: Sequence[TreeEntry]) -> tuple[Digest, bytes]:
    """Encode a listing and return (digest, encoding)."""
    encoded = encode_tree(entries)
    return tree_digest(encoded), encoded
