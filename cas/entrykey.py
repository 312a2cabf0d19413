"""The stat cache's key of a tree entry, and the verdict it keeps.

A key is (kind, mode, size, mtime_ns, ctime_ns, ino, digest-or-None, flag).
Its last field says, beside the entry itself, how the scan judged it: for an
unrecorded entry its reason (with ``ON_DIR`` for a directory), for a file
or link whether it was ignored and kept, for a directory how its entries
were judged (below an ignored directory, kept or sparse). With unchanged
rules a cached name keeps that verdict, and no pattern is matched for it.
"""

from __future__ import annotations

import os
import stat

from .digest import Digest
from .statcache import EntryKey
from .tree import Ident, Kind, TreeEntry, Unrecorded

# Plain ints in cache keys: marshal stores no enum members.
K_FILE, K_SYMLINK, K_DIR, K_UNRECORDED = (
    int(k) for k in (Kind.FILE, Kind.SYMLINK, Kind.DIR, Kind.UNRECORDED)
)
#: The last field of a cache key. For an unrecorded entry: its reason, with
#: ``FLAG_ON_DIR`` when it is a directory. For a file or link: ``FLAG_IGNORED`` when
#: ignored and kept. For a directory: how its entries were judged (below an
#: ignored directory, kept or sparse), so a cached name keeps its verdict.
FLAG_ON_DIR = 0x40
FLAG_IGNORED = 1
FLAG_DIR_KEPT, FLAG_DIR_SPARSE, FLAG_DIR_LISTED = 1, 2, 3
#: A name's verdict, for the entry at hand: not ignored, ignored by git's
#: rules, excluded by ``.earshotignore``; for an ignored directory that holds
#: tracked paths, ignored but entered for them; for an ignored file the index
#: tracks, recorded (its directory's record then depends on the index).
V_NOT, V_GIT, V_OWN, V_GIT_TRACKED, V_TRACKED = 0, 1, 2, 3, 4
#: Unrecorded reasons that mean "ignored, existence only": not counted as files.
EXISTENCE_ONLY = frozenset(
    {Unrecorded.IGNORED, Unrecorded.CACHE, Unrecorded.EXCLUDED, Unrecorded.BUILD}
)
EXISTENCE_ONLY_CODES = frozenset(int(r) for r in EXISTENCE_ONLY)


FLAG_DIR_NORMAL = 0
FLAG_BUILD = int(Unrecorded.BUILD)


def unrecorded_key(st: os.stat_result, size: int, why: Unrecorded) -> EntryKey:
    """The cache key of an unrecorded entry, with its identity (inode; a file's mtime)."""
    on_dir = stat.S_ISDIR(st.st_mode)
    return (
        K_UNRECORDED,
        stat.S_IMODE(st.st_mode),
        size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        None,
        int(why) | (FLAG_ON_DIR if on_dir else 0),
    )


def is_dir_key(key: EntryKey) -> bool:
    """Whether a cache key is of a directory (an unrecorded one included)."""
    return key[0] == K_DIR or (key[0] == K_UNRECORDED and bool(key[7] & FLAG_ON_DIR))


def verdict_of(key: EntryKey) -> int:
    """The verdict a cached key was recorded under (the same rules apply still)."""
    kind, flag = key[0], key[7]
    if kind == K_UNRECORDED:
        reason = flag & ~FLAG_ON_DIR
        if reason == Unrecorded.EXCLUDED:
            return V_OWN
        return V_GIT if reason in EXISTENCE_ONLY_CODES else V_NOT
    if kind == K_DIR:
        if flag in (FLAG_DIR_KEPT, FLAG_DIR_LISTED):
            return V_GIT
        return V_GIT_TRACKED if flag == FLAG_DIR_SPARSE else V_NOT
    return V_GIT if flag == FLAG_IGNORED else V_NOT


def counts_as_file(entry: TreeEntry) -> bool:
    """Whether an entry counts among a tree's files: recorded, or a file whose
    content was not read (too large, unreadable); not what is kept as
    existence only, nor a special file or directory."""
    if entry.kind is Kind.FILE:
        return True
    if entry.kind is not Kind.UNRECORDED:
        return False
    if entry.ident is not None and entry.ident.is_dir:
        return False
    return entry.reason in (Unrecorded.TOO_LARGE, Unrecorded.UNREADABLE)


def entry_from_key(name: bytes, key: EntryKey) -> TreeEntry:
    kind = Kind(key[0])
    if kind is Kind.UNRECORDED:
        on_dir = bool(key[7] & FLAG_ON_DIR)
        # A key cached before identities were kept (no inode) gives none.
        ident = Ident(key[5], key[3], on_dir) if key[5] else None
        return TreeEntry(name, kind, key[1], key[2], None, Unrecorded(key[7] & ~FLAG_ON_DIR), ident)
    assert key[6] is not None
    return TreeEntry(name, kind, key[1], key[2], Digest(key[6]))
