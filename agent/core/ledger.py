"""Ledger lines: what a batch changed, found by comparing recorded trees.

A line names a path, its state before and after, and who changed it: a
call's index when the state before the call was exact, else "restage".
Lines are merged per path when a batch commits (the first line's before,
the last line's after), and marked *ambiguous* when another session's batch
ran at the same time: a tree diff cannot tell whose change it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from earshot.agent.core.batch import Change, State
from earshot.cas.diff import ChangeKind, diff_trees
from earshot.cas.digest import Digest
from earshot.cas.lookup import lookup_under
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.tree import Kind


def state_in(reader: ObjectReader, tree: Digest, path: str) -> State | None:
    """What ``tree`` holds at ``path``: a state, "inside an unrecorded directory", or None."""
    entry, under = lookup_under(reader, tree, path)
    state = State.of(entry)
    if under and state is not None:
        return State.inside(under, state)
    return state


def state_at(project: Project, tree: Digest | None, path: str) -> State | None:
    """What ``tree`` holds at ``path`` (None: absent, or no tree)."""
    if tree is None:
        return None
    with project.store.reader() as reader:
        return state_in(reader, tree, path)


def tree_changes(project: Project, old: Digest, new: Digest, *, by: int | str) -> list[Change]:
    """Every path whose state differs from ``old`` to ``new``, attributed to ``by``.

    A directory held on one side and kept as existence only on the other (an
    ignored directory that outgrew the budget, or that a batch made from a
    file) gives the paths below it a state "inside an unrecorded directory"
    on that side, never "absent": whether they were there is not known, so
    undo never deletes or overwrites them.
    """
    lines: list[Change] = []
    opaque: list[tuple[str, bool, State]] = []  # (prefix, on the old side, the dir's state)
    with project.store.reader() as reader:
        for c in diff_trees(reader, old, new):
            before, after = State.of(c.old), State.of(c.new)
            while opaque and not c.path.startswith(opaque[-1][0]):
                opaque.pop()
            if opaque:
                prefix, old_side, state = opaque[-1]
                inside = State.inside(prefix[:-1], state)
                if old_side and before is None:
                    before = inside
                elif not old_side and after is None:
                    after = inside
            if before != after:
                lines.append(Change(c.path, before, after, by))
            if c.kind is ChangeKind.TYPE and before is not None and after is not None:
                if _opaque_dir(before) and after.kind is Kind.DIR:
                    opaque.append((c.path + "/", True, before))
                elif before.kind is Kind.DIR and _opaque_dir(after):
                    opaque.append((c.path + "/", False, after))
    return lines


def _opaque_dir(state: State) -> bool:
    """An unrecorded directory (or an unrecorded entry that may be one: no identity)."""
    return state.kind is Kind.UNRECORDED and (state.ident is None or state.ident.is_dir)


def merge_ledger(lines: Iterable[Change]) -> list[Change]:
    """One line per path: the first line's before, the last line's after."""
    merged: dict[str, Change] = {}
    for line in lines:
        prior = merged.get(line.path)
        if prior is None:
            merged[line.path] = line
        else:
            by = prior.by if prior.by == line.by else line.by
            ambiguous = prior.ambiguous or line.ambiguous
            merged[line.path] = Change(line.path, prior.before, line.after, by, ambiguous)
    return [c for c in merged.values() if c.before != c.after]


_KNOWN_WRITES = frozenset({"write_file", "edit"})


def mark_ambiguous(lines: Sequence[Change], calls: Sequence[dict[str, Any]]) -> list[Change]:
    """The ledger of a batch that ran beside another session's: whatever a tree
    diff found (a command's changes, a restage's, an agent's call's) may be the
    other's; what earshot's own write_file or edit wrote is its own."""

    def found_by_diff(line: Change) -> bool:
        if not isinstance(line.by, int):
            return True
        # earshot's own write_file or edit knows what it wrote; any other call
        # (a command, an agent's own tool seen through its hooks) is found by a
        # diff. An agent's call carries the agent's id for it, whatever its
        # tool is named: Gemini CLI's write tool is called write_file too, and
        # what changed while it ran may be another session's.
        if not 0 <= line.by < len(calls):
            return False
        call = calls[line.by]
        return call.get("tool") not in _KNOWN_WRITES or "id" in call

    return [replace(line, ambiguous=True) if found_by_diff(line) else line for line in lines]
