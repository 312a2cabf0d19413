"""Restoring a root to a tree: plan first, then apply, never outside the root.

The plan compares the current state (a fresh scan, stored like any snapshot,
so a restore can itself be reverted) with the target, and sorts every
difference into writes, directory creations, deletions, mode changes and
skips. Extra paths on disk are deleted only when the caller's ``may_delete``
rule says so (the ledger, for undo; ``--force`` for a bare restore); by
default they are kept and reported. Whatever the rule, an extra path the
target state ignores is kept (its own ``.gitignore``/``.earshotignore``
files, as recorded, and ``.git/info/exclude`` as on disk), unless git's
index tracks it: ``git reset --hard`` then ``git clean`` would judge so too. Unrecorded entries (too
large, unreadable, special) are never written, overwritten or deleted.

Applying a plan is ``cas.apply``'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .digest import Digest
from .ignore import LEVEL_FILES, IgnoreRules
from .objects import ObjectReader
from .tree import Ident, Kind, TreeEntry, Unrecorded

DeleteRule = Callable[[str, TreeEntry], bool]

_UNRECORDED = "too large, unreadable, special or too deep"
_WHY = {
    Unrecorded.TOO_LARGE: "too large",
    Unrecorded.TOO_DEEP: "too deep to record",
    Unrecorded.UNREADABLE: "unreadable",
    Unrecorded.SPECIAL: "a special file or file system",
    Unrecorded.IGNORED: "ignored, over the limits for ignored files",
    Unrecorded.CACHE: "a regenerable cache",
    Unrecorded.EXCLUDED: "excluded by .earshotignore",
    Unrecorded.BUILD: "a build output",
}


def keep_everything(path: str, entry: TreeEntry) -> bool:
    """The default rule: delete nothing that is not proven."""
    return False


def delete_everything(path: str, entry: TreeEntry) -> bool:
    """``--force``: mirror the target exactly."""
    return True


@dataclass(slots=True)
class RestorePlan:
    """What applying would do; ``skipped`` holds (path, reason) for what it won't."""

    writes: list[tuple[str, TreeEntry]] = field(default_factory=list)
    mkdirs: list[tuple[str, TreeEntry]] = field(default_factory=list)
    deletes: list[tuple[str, TreeEntry]] = field(default_factory=list)
    rmdirs: list[str] = field(default_factory=list)
    chmods: list[tuple[str, TreeEntry]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: (from, to, identity): an entry whose content is not held, moved back
    #: by a rename, only while ``from`` is still that inode and ``to`` is free.
    renames: list[tuple[str, str, Ident]] = field(default_factory=list)
    #: What each write replaces, as planned (None: nothing). The applier checks
    #: it again just before its rename: an edit made meanwhile is kept.
    replaces: dict[str, TreeEntry | None] = field(default_factory=dict)

    def write(self, path: str, entry: TreeEntry, replaces: TreeEntry | None) -> None:
        """Plan writing ``entry`` at ``path`` over ``replaces`` (what is there now)."""
        self.writes.append((path, entry))
        self.replaces[path] = replaces

    @property
    def empty(self) -> bool:
        return not (
            self.writes or self.mkdirs or self.deletes or self.rmdirs or self.chmods or self.renames
        )


IGNORED_BY_TARGET = "ignored by the snapshot's rules; kept"


class _Planner:
    def __init__(self, reader: ObjectReader, may_delete: DeleteRule, root: str | None) -> None:
        self.reader = reader
        self.may_delete = may_delete
        self.root = root
        self.plan = RestorePlan()

    def children(self, digest: Digest | None) -> dict[bytes, TreeEntry]:
        if digest is None:
            return {}
        return {e.name: e for e in self.reader.read_tree(digest)}

    def ignore_files(self, target: Digest | None) -> list[tuple[str, bytes | None]]:
        """The target directory's ignore files as recorded (None: it has none)."""
        entries = self.children(target)
        found: list[tuple[str, bytes | None]] = []
        for name in LEVEL_FILES:
            entry = entries.get(name.encode())
            data = None  # a symlink is not followed, as git does not (2.32+)
            if entry is not None and entry.kind is Kind.FILE and entry.digest is not None:
                data = self.reader.read_blob(entry.digest)
            found.append((name, data))
        return found

    def inner(self, path: str, rules: IgnoreRules, target: Digest | None) -> IgnoreRules:
        """The target's rules inside directory ``path`` (``target``: its recorded tree)."""
        if rules.is_ignored(path, True):
            rules = rules.below_ignored()  # everything below is ignored (what git tracks aside)
        where = os.path.join(self.root, path) if self.root is not None else None
        return rules.descend_with(path, self.ignore_files(target), where)

    def tree(
        self, prefix: str, current: Digest | None, target: Digest | None, rules: IgnoreRules
    ) -> bool:
        """Plan one directory's content; True if everything extra in it goes.

        ``rules``: the target state's ignore rules for this directory's entries.
        """
        if current == target:
            return True
        now = self.children(current)
        want = self.children(target)
        clean = True
        for name in sorted(now.keys() | want.keys()):
            path = prefix + name.decode("utf-8", "surrogateescape")
            clean &= self.entry(path, now.get(name), want.get(name), rules)
        return clean

    def extra(self, path: str, cur: TreeEntry, rules: IgnoreRules) -> bool:
        """A path on disk the target lacks: delete it only if the rule allows.

        Never one the target's rules ignore: that state would not have had it
        recorded, so it says nothing about it.
        """
        if cur.kind is Kind.UNRECORDED:
            self.plan.skipped.append((path, f"not recorded ({_UNRECORDED}); kept"))
            return False
        if rules.excludes(path, cur.kind is Kind.DIR):
            self.plan.skipped.append((path, IGNORED_BY_TARGET))
            return False
        if cur.kind is Kind.DIR:
            if self.tree(path + "/", cur.digest, None, self.inner(path, rules, None)):
                self.plan.rmdirs.append(path)
                return True
            return False
        if self.may_delete(path, cur):
            self.plan.deletes.append((path, cur))
            return True
        self.plan.skipped.append((path, "not in the snapshot and not proven safe to delete; kept"))
        return False

    def entry(
        self, path: str, cur: TreeEntry | None, tgt: TreeEntry | None, rules: IgnoreRules
    ) -> bool:
        plan = self.plan
        if tgt is None:
            return self.extra(path, cur, rules) if cur is not None else True
        if tgt.kind is Kind.UNRECORDED:
            if cur is None:
                plan.skipped.append((path, "its content was not recorded; cannot restore it"))
            return True
        if cur is not None and cur.kind is Kind.UNRECORDED:
            why = _WHY.get(cur.reason, "not recorded") if cur.reason is not None else "not recorded"
            plan.skipped.append((path, f"not recorded on disk ({why}); left alone"))
            return True
        if tgt.kind is Kind.DIR:
            if cur is None or cur.kind is not Kind.DIR:
                # A file or link in the way is overwritten (its content is in the
                # pre-restore snapshot); the new directory is built from nothing.
                plan.mkdirs.append((path, tgt))
                self.tree(path + "/", None, tgt.digest, rules)  # nothing extra to judge
                if cur is not None:
                    plan.deletes.append((path, cur))
                return True
            if cur.digest != tgt.digest:  # an equal subtree costs nothing, not even its rules
                self.tree(path + "/", cur.digest, tgt.digest, self.inner(path, rules, tgt.digest))
            if cur.mode != tgt.mode:
                plan.chmods.append((path, tgt))
            return True
        # The target is a file or a symlink.
        if cur is not None and cur.kind is Kind.DIR:
            if not self.extra(path, cur, rules):
                plan.skipped.append((path, "a directory with kept content is in the way"))
                return False
            plan.write(path, tgt, None)  # the directory is removed first
            return True
        if cur is None or cur.kind is not tgt.kind or cur.digest != tgt.digest:
            plan.write(path, tgt, cur)
        elif cur.mode != tgt.mode:
            plan.chmods.append((path, tgt))
        return True


def plan_restore(
    reader: ObjectReader,
    current: Digest | None,
    target: Digest,
    may_delete: DeleteRule = keep_everything,
    root: str | None = None,
) -> RestorePlan:
    """Plan the restore of ``target`` over the tree now on disk (``current``).

    ``root``: where the tree lies on disk, for what is never recorded
    (``.git/info/exclude``, nested repositories' ``.git``); without it,
    only the target's recorded ignore files judge its extra paths.
    """
    planner = _Planner(reader, may_delete, root)
    rules = IgnoreRules.for_recorded_root(root, planner.ignore_files(target))
    planner.tree("", current, target, rules)
    return planner.plan
