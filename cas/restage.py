"""Scoped restage: bring only named paths up to date, on top of a previous tree.

The paths an agent wrote, or those a watcher saw change, are re-read and their
parents' trees re-encoded; nothing else is walked. A named path that is a
directory is scanned whole (a watcher reports only a new directory, not what
was created inside it). A named path under a symlink or a file on disk is
taken at the first component that is not a real directory: that link or file
is what the tree records.

Paths are judged as a full scan judges them: the rules of each directory
are carried down from the root (a nested repository brings its own), and
a path the index tracks is recorded whatever the rules say. An ignored
directory a named path lies in is read again only where named when the
last walk walked it (kept, listed, sparse: its cache key says); else it is
judged whole, as a scan judges it: its verdict is about all of it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import PurePosixPath

from .digest import Digest
from .entrykey import (
    FLAG_DIR_KEPT,
    FLAG_DIR_LISTED,
    FLAG_DIR_SPARSE,
    K_DIR,
    V_GIT,
    V_GIT_TRACKED,
    counts_as_file,
    entry_from_key,
)
from .errors import EarshotError
from .ignore import KEPT, LISTED, SPARSE, IgnoreRules
from .progress import QUIET, Progress
from .recording import MAX_DEPTH, is_temp_name
from .scan import Scanner, fsencode, join
from .statcache import EntryKey, load_record
from .tree import Kind, TreeEntry

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


_MODES = {FLAG_DIR_KEPT: KEPT, FLAG_DIR_LISTED: LISTED, FLAG_DIR_SPARSE: SPARSE}


def _walked_as(key: EntryKey | None) -> str | None:
    """How a scan walked an ignored directory last time (its cache key says), if it did."""
    if key is None or key[0] != K_DIR:
        return None
    return _MODES.get(key[7])


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
        elif counts_as_file(entry):
            self.files += 1
            self.bytes += entry.size


def restage_paths(
    scanner: Scanner,
    base: Digest | None,
    paths: Iterable[str],
    forced: frozenset[str] = frozenset(),
    progress: Progress = QUIET,
) -> tuple[Digest, int, int]:
    """A new root tree: ``base`` with every named path re-read from disk.

    ``forced`` (named paths too) are recorded whatever the ignore rules say,
    with the directories that lead to them: an agent's explicit write target.
    Returns the tree and the files and bytes of what it replaced; the files
    and bytes it read are in ``scanner.report``. ``progress`` hears of each
    named path as it is read (or found gone).
    """
    replaced = _Replaced()
    rules = scanner.root_rules()
    # A lifted path (a destructive command's target) is reached the way a
    # forced one is, through an ignored directory kept as existence only.
    leading = {
        p.rsplit("/", i)[0] for p in forced | scanner.lifted for i in range(1, p.count("/") + 1)
    }
    trie = _trie(paths)
    progress.stage("recording", total=_named(trie))
    done = _Done(scanner, progress)
    tree = _update(scanner, base, "", trie, replaced, rules, _Forced(forced, leading), done)
    return tree, replaced.files, replaced.bytes


class _Done:
    """Tells ``progress`` of the named paths read, with the bytes read for them."""

    def __init__(self, scanner: Scanner, progress: Progress) -> None:
        self.report = scanner.report
        self.progress = progress
        self.shown = self.report.bytes_read

    def paths(self, node: _Trie) -> None:
        """The paths of ``node`` (a named path, or a directory of them) are done."""
        read = self.report.bytes_read
        self.progress.advance(_named(node), read - self.shown)
        self.shown = read


def _named(node: _Trie) -> int:
    """How many named paths ``node`` stands for (itself, or those below it)."""
    if _is_whole(node):
        return 1
    return sum(_named(child) for name, child in node.items() if name)


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
    done: _Done,
) -> Digest:
    """``tree`` (the directory ``rel_dir``) with the trie's paths re-read; ``rules``: its own."""
    reader = scanner.writer
    entries = {e.name: e for e in reader.read_tree(tree)} if tree is not None else {}
    cached: dict[str, EntryKey] | None = None  # the stat cache's keys here, read once
    for name, node in trie.items():
        if not name or name == ".git" or is_temp_name(name):
            if name:
                done.paths(node)
            continue
        rel = join(rel_dir, name)
        path = os.path.join(scanner.root, rel)
        key = fsencode(name)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            replaced.drop(scanner, entries.pop(key, None))
            done.paths(node)
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        if is_dir and path in scanner.options.exclude_dirs:
            replaced.drop(scanner, entries.pop(key, None))
            done.paths(node)
            continue
        verdict = 0 if rel in forced.paths else scanner.judge(rules, rel, is_dir)
        old = entries.get(key)
        if verdict and is_dir and rel in forced.leading:
            # An ignored directory that leads to a forced path: what the trie
            # names below it is recorded, and (when the tree held it whole)
            # the rest as it was; never read whole for the forced path's sake.
            inner = rules.below_ignored(SPARSE)
            base = old.digest if old is not None and old.kind is Kind.DIR else None
            if old is not None and base is None:
                replaced.drop(scanner, old)
            inner = inner.descend(rel, path)
            subtree = _update(scanner, base, rel, node, replaced, inner, forced, done)
            entries[key] = TreeEntry(key, Kind.DIR, stat.S_IMODE(st.st_mode), 0, subtree)
            continue
        whole = _is_whole(node) or not is_dir or old is None or old.kind is not Kind.DIR
        ignored_dir = verdict in (V_GIT, V_GIT_TRACKED) and not whole
        if cached is None and (ignored_dir or whole or verdict or rules.mode is not None):
            record = load_record(reader.view, rel_dir) if scanner.use_cache else None
            cached = record.entries if record is not None else {}
        below = rules.mode or _walked_as((cached or {}).get(name)) if ignored_dir else None
        if below in (KEPT, LISTED) and rules.mode is None:
            # Kept or listed by its size: a change in it may move it across the
            # budget either way, so it is read whole (listed: stats only; kept:
            # the stat cache vouches for what did not change), as a walk would.
            below, whole = None, True
        if below is not None:
            # An ignored directory walked last time (kept, listed, sparse): only
            # the named paths are read again, as in any directory.
            inner = rules.below_ignored(below).descend(rel, path)
            assert old is not None
            subtree = _update(scanner, old.digest, rel, node, replaced, inner, forced, done)
            entries[key] = TreeEntry(key, Kind.DIR, stat.S_IMODE(st.st_mode), 0, subtree)
            continue
        if whole or verdict or rules.mode is not None:
            # Read whole; so is an ignored directory not walked last time: its
            # verdict (kept, listed, one entry) is about all of it.
            replaced.drop(scanner, old)
            found = scanner._entry(path, rel, st, (cached or {}).get(name), rules, verdict)
            if found is None:
                entries.pop(key, None)
            else:
                entries[key] = entry_from_key(key, found)
            done.paths(node)
            continue
        assert old is not None  # not whole: a directory the tree holds
        inner = rules.descend(rel, path)
        subtree = _update(scanner, old.digest, rel, node, replaced, inner, forced, done)
        entries[key] = TreeEntry(key, Kind.DIR, stat.S_IMODE(st.st_mode), 0, subtree)
    return reader.put_tree(list(entries.values()))
