"""Scoped restage: bring only named paths up to date, on top of a previous tree.

The paths an agent wrote, or those a watcher saw change, are re-read and their
parents' trees re-encoded; nothing else is walked. A named path that is a
directory is scanned whole (a watcher reports only a new directory, not what
was created inside it). A named path under a symlink or a file on disk is
taken at the first component that is not a real directory: that link or file
is what the tree records.

Paths are judged as a full scan judges them: the rules of each directory
are carried down from the root (a nested repository brings its own), and
a path the index tracks is recorded whatever the rules say.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import PurePosixPath

from .digest import Digest
from .errors import EarshotError
from .ignore import IgnoreRules
from .scan import MAX_DEPTH, Scanner, entry_from_key, fsencode, is_temp_name, join
from .tree import Kind, TreeEntry, Unrecorded

#: Trie of named paths; an empty dict under a name means "this whole entry".
_Trie = dict[str, "_Trie"]


class PathOutsideRoot(EarshotError):
    """A path that does not name something inside the root."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: outside the root")
        self.path = path


def relative_path(root: str, path: str) -> str:
    """A path as given (absolute, or relative to the root) -> root-relative, checked."""
    if path and path[0] != "/" and path[-1] != "/" and "//" not in path:
        parts = path.split("/")
        if "." not in parts and ".." not in parts:
            return path  # already in its plain form (the common case: ~10x faster)
    pure = PurePosixPath(path)
    if pure.is_absolute():
        try:
            pure = pure.relative_to(root)
        except ValueError:
            raise PathOutsideRoot(path) from None
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise PathOutsideRoot(path)
    return "/".join(parts)


def _trie(paths: Iterable[str]) -> _Trie:
    trie: _Trie = {}
    for path in paths:
        node = trie
        # Deeper than a scan records: its deepest recorded ancestor stands for it.
        parts = path.split("/")[:MAX_DEPTH]
        for i, part in enumerate(parts):
            if i == len(parts) - 1:
                node[part] = {}  # the whole entry, whatever was named below it
            else:
                child = node.setdefault(part, {"": {}})
                if not child:
                    break  # an ancestor is already restaged whole
                node = child
    return trie


def _is_whole(node: _Trie) -> bool:
    return not node


class _Replaced:
    """Files and bytes of the entries a restage replaced (to keep counts exact)."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0

    def drop(self, scanner: Scanner, entry: TreeEntry | None) -> None:
        if entry is None:
            return
        if entry.kind is Kind.DIR and entry.digest is not None:
            for child in scanner.writer.read_tree(entry.digest):
                self.drop(scanner, child)
        elif entry.kind in (Kind.FILE, Kind.UNRECORDED) and entry.reason is not Unrecorded.SPECIAL:
            self.files += 1
            self.bytes += entry.size


def restage_paths(
    scanner: Scanner,
    base: Digest | None,
    paths: Iterable[str],
    forced: frozenset[str] = frozenset(),
) -> tuple[Digest, int, int]:
    """A new root tree: ``base`` with every named path re-read from disk.

    ``forced`` (named paths too) are recorded whatever the ignore rules say,
    with the directories that lead to them: an agent's explicit write target.
    Returns the tree and the files and bytes of what it replaced; the files
    and bytes it read are in ``scanner.report``.
    """
    replaced = _Replaced()
    rules = scanner.root_rules()
    leading = {p.rsplit("/", i)[0] for p in forced for i in range(1, p.count("/") + 1)}
    tree = _update(scanner, base, "", _trie(paths), replaced, rules, _Forced(forced, leading))
    return tree, replaced.files, replaced.bytes


class _Forced:
    """Paths recorded whatever the rules say, and the directories that lead to them."""

    def __init__(self, paths: frozenset[str], leading: set[str]) -> None:
        self.paths = paths
        self.leading = leading


def _update(
    scanner: Scanner,
    tree: Digest | None,
    rel_dir: str,
    trie: _Trie,
    replaced: _Replaced,
    rules: IgnoreRules,
    forced: _Forced,
) -> Digest:
    """``tree`` (the directory ``rel_dir``) with the trie's paths re-read; ``rules``: its own."""
    reader = scanner.writer
    entries = {e.name: e for e in reader.read_tree(tree)} if tree is not None else {}
    for name, node in trie.items():
        if not name or name == ".git" or is_temp_name(name):
            continue
        rel = join(rel_dir, name)
        path = os.path.join(scanner.root, rel)
        key = fsencode(name)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            replaced.drop(scanner, entries.pop(key, None))
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        inner = rules
        leads = is_dir and rel in forced.leading
        lead_only = False  # an ignored directory, there only to lead to a forced path
        if rules.is_ignored(rel, is_dir):
            tracked = rules.tracks(rel, is_dir)
            if not (tracked or rel in forced.paths or leads):
                replaced.drop(scanner, entries.pop(key, None))
                continue
            lead_only = leads and not tracked
            inner = rules.below_ignored() if is_dir else rules
        if is_dir and path in scanner.options.exclude_dirs:
            replaced.drop(scanner, entries.pop(key, None))
            continue
        old = entries.get(key)
        # Such a directory is not read whole (its rules ignore the rest): only
        # what the trie names below it.
        if lead_only and not _is_whole(node) and (old is None or old.kind is not Kind.DIR):
            subtree = _update(scanner, None, rel, node, replaced, inner.descend(rel, path), forced)
            replaced.drop(scanner, old)
            entries[key] = TreeEntry(key, Kind.DIR, stat.S_IMODE(st.st_mode), 0, subtree)
            continue
        if _is_whole(node) or not is_dir or old is None or old.kind is not Kind.DIR:
            replaced.drop(scanner, old)
            found = scanner._entry(path, rel, st, None, inner)
            if found is None:
                entries.pop(key, None)
            else:
                entries[key] = entry_from_key(key, found)
            continue
        subtree = _update(
            scanner, old.digest, rel, node, replaced, inner.descend(rel, path), forced
        )
        entries[key] = TreeEntry(key, Kind.DIR, stat.S_IMODE(st.st_mode), 0, subtree)
    return reader.put_tree(list(entries.values()))
