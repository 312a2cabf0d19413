"""Differences between two trees, skipping subtrees whose digests are equal."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from .digest import Digest
from .objects import ObjectReader
from .tree import Kind, TreeEntry


class ChangeKind(Enum):
    ADDED = "added"
    DELETED = "deleted"
    MODIFIED = "modified"
    #: Same content, other permission bits.
    MODE = "mode"
    #: A file became a directory, a symlink a file, and so on.
    TYPE = "type"


@dataclass(frozen=True, slots=True)
class Change:
    """One path that differs; ``old``/``new`` are ``None`` when absent."""

    path: str
    kind: ChangeKind
    old: TreeEntry | None
    new: TreeEntry | None


def _children(reader: ObjectReader, digest: Digest | None) -> dict[bytes, TreeEntry]:
    if digest is None:
        return {}
    return {e.name: e for e in reader.read_tree(digest)}


def diff_trees(
    reader: ObjectReader, old: Digest | None, new: Digest | None, prefix: str = ""
) -> Iterator[Change]:
    """Changes from ``old`` to ``new``, leaves only (files, links, empty dirs), in path order.

    Directories are reported only when they appear or vanish empty, or change
    type; a directory added with content is reported through its files.
    """
    if old == new:
        return
    before = _children(reader, old)
    after = _children(reader, new)
    for name in sorted(before.keys() | after.keys()):
        path = prefix + name.decode("utf-8", "surrogateescape")
        a = before.get(name)
        b = after.get(name)
        yield from _diff_entry(reader, path, a, b)


def _diff_entry(
    reader: ObjectReader, path: str, a: TreeEntry | None, b: TreeEntry | None
) -> Iterator[Change]:
    a_dir = a is not None and a.kind is Kind.DIR
    b_dir = b is not None and b.kind is Kind.DIR
    if a_dir or b_dir:
        if a is not None and b is not None and a.kind is not b.kind:
            yield Change(path, ChangeKind.TYPE, a, b)
        old = a.digest if a is not None and a_dir else None
        new = b.digest if b is not None and b_dir else None
        if a is not None and b is not None and a.kind is b.kind and a.mode != b.mode:
            yield Change(path, ChangeKind.MODE, a, b)  # reported even if content changed too
        subtree = list(diff_trees(reader, old, new, path + "/"))
        if subtree:
            yield from subtree
        elif a is None and b is not None:
            yield Change(path, ChangeKind.ADDED, None, b)
        elif b is None and a is not None:
            yield Change(path, ChangeKind.DELETED, a, None)
        return
    if a is None and b is not None:
        yield Change(path, ChangeKind.ADDED, None, b)
    elif b is None and a is not None:
        yield Change(path, ChangeKind.DELETED, a, None)
    elif a is not None and b is not None:
        if a.kind is not b.kind:
            yield Change(path, ChangeKind.TYPE, a, b)
        elif a.digest != b.digest or a.size != b.size or a.ident != b.ident:
            # An unrecorded entry has no digest: its identity (inode, mtime)
            # says whether it is still the same file.
            yield Change(path, ChangeKind.MODIFIED, a, b)
        elif a.mode != b.mode:
            yield Change(path, ChangeKind.MODE, a, b)
