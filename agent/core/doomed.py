"""What a destructive command is about to delete that earshot does not hold.

An ignored directory over the budget, a file over the limit for ignored files
or over the size limit: kept as existence only, they could not be brought
back. Before a command that names them (``rm -rf data``, ``find data
-delete``, ``git clean -fdx``) runs, the paths under its targets whose content
is not held are recorded, past those limits, within the budget of
``cas.keep.Lift``; what the budget cannot take stays existence only, and the
batch says so. Regenerable output (a cache directory, ignored build output)
is read too, from the lift's smaller budget for it: a small project's
``dist/`` comes back after ``git clean -fdx``, a built kernel's objects stay
existence only. What ``.earshotignore`` excludes is never read: the person
said so.
"""

from __future__ import annotations

import fnmatch
import re

from earshot.cas.digest import Digest
from earshot.cas.keep import DEFAULT_DIR_FILES, DEFAULT_LIFT_FILES
from earshot.cas.lookup import lookup, lookup_under
from earshot.cas.objects import ObjectReader
from earshot.cas.tree import Kind, Unrecorded

#: Why a path's content was not held, when a command's targets make it worth reading.
WORTH_READING = frozenset({Unrecorded.IGNORED, Unrecorded.TOO_LARGE})
#: Regenerable output, worth reading within the lift's smaller budget for it.
REGENERABLE = frozenset({Unrecorded.CACHE, Unrecorded.BUILD})
#: Unheld paths looked for under one command's targets, at most: as many as
#: the budget for reading them first may take (``cas.keep.Lift``); of
#: regenerable output, as many as its default budget (a cache directory is one).
MAX_FOUND = DEFAULT_LIFT_FILES
MAX_REGENERABLE = DEFAULT_DIR_FILES


def expand(reader: ObjectReader, tree: Digest, target: str) -> list[str]:
    """The paths of ``tree`` a target names: itself, or what its glob matches
    (a shell matches names on disk; the tree holds the same names)."""
    if not _GLOB.search(target):
        return [target]
    paths = [""]
    for part in target.split("/"):
        following: list[str] = []
        for prefix in paths:
            if not _GLOB.search(part):
                following.append(f"{prefix}/{part}".lstrip("/"))
                continue
            entry = lookup(reader, tree, prefix) if prefix else None
            digest = tree if not prefix else (entry.digest if entry is not None else None)
            if digest is None or (entry is not None and entry.kind is not Kind.DIR):
                continue
            hidden = part.startswith(".")  # as a shell: * does not match a leading dot
            for child in reader.read_tree(digest):
                name = child.name.decode("utf-8", "surrogateescape")
                if fnmatch.fnmatchcase(name, part) and (hidden or not name.startswith(".")):
                    following.append(f"{prefix}/{name}".lstrip("/"))
        paths = following[:MAX_FOUND]
    return paths


_GLOB = re.compile(r"[*?\[]")


def unheld_under(reader: ObjectReader, tree: Digest, targets: list[str]) -> list[str]:
    """The paths at or under ``targets`` (root-relative, "" for the root; globs
    matched against the tree) that ``tree`` holds as existence only, for a
    reason worth reading them now."""
    found: list[str] = []
    regenerable: list[str] = []

    def worth(path: str, reason: Unrecorded | None) -> None:
        if reason in WORTH_READING:
            found.append(path)
        elif reason in REGENERABLE and len(regenerable) < MAX_REGENERABLE:
            regenerable.append(path)

    for target in [path for t in targets for path in (expand(reader, tree, t) if t else [t])]:
        if target:
            entry, under = lookup_under(reader, tree, target)
            if entry is None:
                continue
            if entry.kind is Kind.UNRECORDED:
                if under:
                    found.append(target)  # below one: reached through it, as a forced path
                else:
                    worth(target, entry.reason)
                continue
            if entry.kind is not Kind.DIR or entry.digest is None:
                continue
            digest: Digest = entry.digest
        else:
            digest = tree
        stack = [(target, digest)]
        while stack and len(found) < MAX_FOUND:
            prefix, current = stack.pop()
            for child in reader.read_tree(current):
                path = f"{prefix}/{child.name.decode('utf-8', 'surrogateescape')}".lstrip("/")
                if child.kind is Kind.DIR and child.digest is not None:
                    stack.append((path, child.digest))
                elif child.kind is Kind.UNRECORDED:
                    worth(path, child.reason)
    return sorted(set(found))[:MAX_FOUND] + sorted(set(regenerable) - set(found))
