"""What a destructive command is about to delete that earshot does not hold.

An ignored directory over the budget, a file over the limit for ignored files
or over the size limit: kept as existence only, they could not be brought
back. Before a command that names them (``rm -rf data``, ``find data
-delete``, ``git clean -fdx``) runs, the paths under its targets whose content
is not held are recorded, past those limits, within the budget of
``cas.keep.Lift``; what the budget cannot take stays existence only, and the
batch says so. Caches, build output and what ``.earshotignore`` excludes are
never read for this: they are regenerable, or the person said so.
"""

from __future__ import annotations

from earshot.cas.digest import Digest
from earshot.cas.lookup import lookup_under
from earshot.cas.objects import ObjectReader
from earshot.cas.tree import Kind, Unrecorded

#: Why a path's content was not held, when a command's targets make it worth reading.
WORTH_READING = frozenset({Unrecorded.IGNORED, Unrecorded.TOO_LARGE})
#: Unheld paths looked for under one command's targets, at most.
MAX_FOUND = 10_000


def unheld_under(reader: ObjectReader, tree: Digest, targets: list[str]) -> list[str]:
    """The paths at or under ``targets`` (root-relative, "" for the root) that
    ``tree`` holds as existence only, for a reason worth reading them now."""
    found: list[str] = []
    for target in targets:
        if target:
            entry, under = lookup_under(reader, tree, target)
            if entry is None:
                continue
            if entry.kind is Kind.UNRECORDED:
                if under or entry.reason in WORTH_READING:
                    found.append(target)  # below one: reached through it, as a forced path
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
                elif child.kind is Kind.UNRECORDED and child.reason in WORTH_READING:
                    found.append(path)
    return sorted(set(found))[:MAX_FOUND]
