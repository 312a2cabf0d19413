"""Planning and applying a reversal: ledger steps back to the states before them.

A *reversal* is what an undo, redo or rewind takes back: per path, what the
disk should hold now (the latest batch's after) and what to bring back (the
earliest batch's before). ``Reverter.plan`` checks each step against the disk
as just recorded and sorts it: restored, deleted, a conflict, or kept on
purpose (not made by a call, not held by earshot). ``Reverter.apply`` carries
out a verified plan through ``cas.restore`` and records the state after.
The rules (promises 2, 3 and 8): a path is deleted only when its state before
was "absent", a call of the session made it, the disk still holds what the
batch left, and (for a change made while another session ran) only with
``--force``; a path is overwritten only when the disk holds what the batches
left, or with ``--force``; a path whose state earshot does not hold is never
touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, Change, State
from earshot.cas.digest import Digest
from earshot.cas.intents import Held
from earshot.cas.lookup import is_dir, lookup
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.restore import Applier, RestorePlan
from earshot.cas.tree import Kind, TreeEntry

#: Why undo keeps a created path it cannot prove a call made: final, no retry
#: (not even --force) would delete it.
NOT_BY_A_CALL = "not made by a call of this session; kept"
#: A path whose state before the batch earshot never held (over the size
#: limit, unreadable, a FIFO): it cannot be brought back, and is not touched.
NOT_HELD_BEFORE = (
    "its state before was not recorded (too large, unreadable, special or too deep); kept"
)
#: A path present now whose content earshot does not hold: never overwritten or deleted.
NOT_HELD_NOW = "not recorded as it is now (too large, unreadable, special or too deep); left alone"


@dataclass(slots=True)
class Impact:
    """What an undo or redo did (or, with dry run, would do)."""

    batches: list[int]
    restored: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    #: Paths left alone on purpose, with the reason (e.g. not made by a call).
    kept: list[tuple[str, str]] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    record: int | None = None
    #: Conflicts that are creations another session may have made (--force deletes).
    ambiguous: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Step:
    """One path: from what the disk should hold, back to what it held."""

    path: str
    expect: State | None
    restore_to: State | None
    by_call: bool
    #: A batch of another session ran beside it: the change may be that one's.
    ambiguous: bool = False


def steps_of(batches: list[Batch]) -> list[Step]:
    """Per path: the earliest batch's before, the latest batch's after."""
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    for batch in sorted(batches, key=lambda b: b.seq):
        for line in batch.ledger:
            first.setdefault(line.path, line)
            last[line.path] = line
    return [
        Step(
            path,
            expect=last[path].after,
            restore_to=first[path].before,
            by_call=isinstance(first[path].by, int),
            ambiguous=first[path].ambiguous,
        )
        for path in sorted(first)
    ]


@dataclass(frozen=True, slots=True)
class Reversal:
    """What a revert undoes or replays, and what its batch will say."""

    kind: BatchKind
    steps: list[Step]
    #: The tree before the earliest reverted batch: which directories existed then.
    anchor_tree: Digest | None
    #: The batches reverted (undo, rewind) or the undo replayed (redo).
    targets: tuple[int, ...]
    call: dict[str, Any]
    #: Undo deletes only what a call made; redo replays what an undo did.
    deletions_need_call: bool
    #: The batches the impact lists (newest first for undo).
    shown: list[int]


def tree_of(project: Project, snapshot: Digest | None) -> Digest | None:
    if snapshot is None:
        return None
    return project.read_snapshot(snapshot).tree


def undo_reversal(
    project: Project, targets: list[Batch], kind: BatchKind, call: dict[str, Any]
) -> Reversal:
    """Take back ``targets`` (oldest first): an undo or a rewind."""
    return Reversal(
        kind=kind,
        steps=steps_of(targets),
        anchor_tree=tree_of(project, targets[0].before),
        targets=tuple(b.seq for b in targets),
        call=call,
        deletions_need_call=True,
        shown=[b.seq for b in reversed(targets)],
    )


def redo_reversal(project: Project, undone: Batch) -> Reversal:
    """Replay what the undo (or rewind) ``undone`` took back."""
    return Reversal(
        kind=BatchKind.REDO,
        steps=[Step(c.path, c.after, c.before, by_call=True) for c in undone.ledger],
        anchor_tree=tree_of(project, undone.before),
        targets=(undone.seq,),
        call={"tool": "redo"},
        deletions_need_call=False,
        shown=list(undone.targets),
    )


def temp_dirs(paths: list[str]) -> list[str]:
    """The directories a revert of ``paths`` may write temp files into."""
    return sorted({p.rpartition("/")[0] for p in paths})


def _blocked(reader: ObjectReader, tree: Digest, path: str) -> bool:
    """Whether an ancestor of ``path`` exists but is not a directory (a link, a file).

    An absent ancestor is fine: undo recreates it. One that is a link must
    never be written through, nor hide a path undo should report.
    """
    parts = path.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        entry = lookup(reader, tree, "/".join(parts[:depth]))
        if entry is None:
            return False
        if entry.kind is not Kind.DIR:
            return True
    return False


def _entry(path: str, state: State) -> TreeEntry:
    name = path.rpartition("/")[2].encode("utf-8", "surrogateescape")
    return TreeEntry(name, state.kind, state.mode, 0, state.digest)


class Reverter:
    """Plans and applies the reversal of a set of ledger steps."""

    def __init__(self, project: Project) -> None:
        self.project = project

    def plan(
        self, rev: Reversal, now_tree: Digest | None, impact: Impact, force: bool
    ) -> RestorePlan:
        """The plan to revert ``rev`` over ``now_tree``; fills ``impact`` as it goes."""
        plan = RestorePlan()
        if now_tree is None:
            return plan
        mkdirs: set[str] = set()
        with self.project.store.reader() as reader:
            for step in rev.steps:
                current = State.of(lookup(reader, now_tree, step.path))
                if _blocked(reader, now_tree, step.path):
                    # Changed since the batch in the way that matters most: a
                    # parent is now a link (never written through) or a file.
                    impact.conflicts.append(step.path)
                    continue
                if current == step.restore_to:
                    continue
                # What earshot does not hold, it does not touch (promise 8).
                if step.restore_to is not None and not step.restore_to.recorded:
                    impact.kept.append((step.path, NOT_HELD_BEFORE))
                    continue
                if current is not None and not current.recorded:
                    impact.kept.append((step.path, NOT_HELD_NOW))
                    continue
                if step.restore_to is None:
                    if not step.by_call and rev.deletions_need_call:
                        impact.kept.append((step.path, NOT_BY_A_CALL))
                    elif current != step.expect:
                        impact.conflicts.append(step.path)
                    elif step.ambiguous and not force:
                        # Another session's batch ran at the same time and may
                        # have made it: deleted only with --force.
                        impact.conflicts.append(step.path)
                        impact.ambiguous.append(step.path)
                    elif current is not None and current.kind is Kind.DIR:
                        plan.rmdirs.append(step.path)  # only if still empty then
                        impact.deleted.append(step.path)
                    elif current is not None:
                        plan.deletes.append((step.path, _entry(step.path, current)))
                        impact.deleted.append(step.path)
                    continue
                if current != step.expect and not force:
                    impact.conflicts.append(step.path)
                    continue
                self._parents(reader, now_tree, rev.anchor_tree, step.path, plan, mkdirs)
                if step.restore_to.kind is Kind.DIR:
                    if current is not None and current.kind is not Kind.DIR:
                        impact.conflicts.append(step.path)  # a file where a directory was
                        continue
                    entry = _entry(step.path, step.restore_to)
                    if current is None and step.path not in mkdirs:
                        plan.mkdirs.append((step.path, entry))
                        mkdirs.add(step.path)
                    elif current is not None:
                        plan.chmods.append((step.path, entry))
                    impact.restored.append(step.path)
                    continue
                plan.writes.append((step.path, _entry(step.path, step.restore_to)))
                impact.restored.append(step.path)
            rmdirs: set[str] = set()
            for path in impact.deleted:
                self._created_dirs(reader, rev.anchor_tree, path, plan, rmdirs)
        impact.removed_dirs = sorted(rmdirs)
        return plan

    def apply(self, plan: RestorePlan, now_tree: Digest, impact: Impact, held: Held) -> Digest:
        """Carry out a verified plan; record and return the snapshot after it."""
        with self.project.store.reader() as blobs:
            result = Applier(str(self.project.root), blobs, held.id).apply(plan, verified=True)
        for path, reason in result.skipped:
            impact.kept.append((path, reason))
            if path in impact.restored:
                impact.restored.remove(path)
            if path in impact.deleted:
                impact.deleted.remove(path)
        impact.removed_dirs = result.removed_dirs
        touched = {p for p, _ in plan.writes + plan.deletes}
        touched |= set(result.removed_dirs) | set(result.created_dirs)
        # Forced, as the state before was: a path a ledger names is recorded
        # whatever the ignore rules say (a .env ignored since stays held).
        after = self.project.record(
            sorted(touched), base=now_tree, note="after undo", listed=False, forced=touched
        )
        return after.digest

    def _parents(
        self,
        reader: ObjectReader,
        now: Digest,
        anchor: Digest | None,
        path: str,
        plan: RestorePlan,
        planned: set[str],
    ) -> None:
        """Directories a restored path needs, as they were before the batches."""
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/".join(parts[:depth])
            if parent in planned or is_dir(reader, now, parent):
                continue
            old = lookup(reader, anchor, parent) if anchor is not None else None
            mode = old.mode if old is not None and old.kind is Kind.DIR else 0o755
            name = parts[depth - 1].encode("utf-8", "surrogateescape")
            plan.mkdirs.append((parent, TreeEntry(name, Kind.DIR, mode, 0, None)))
            planned.add(parent)

    def _created_dirs(
        self,
        reader: ObjectReader,
        anchor: Digest | None,
        path: str,
        plan: RestorePlan,
        planned: set[str],
    ) -> None:
        """Parents of a deleted path that did not exist before the batches."""
        parts = path.split("/")[:-1]
        for depth in range(len(parts), 0, -1):
            parent = "/".join(parts[:depth])
            if parent in planned:
                break  # and every ancestor of it was looked at already
            if anchor is not None and is_dir(reader, anchor, parent):
                break
            plan.rmdirs.append(parent)
            planned.add(parent)


def self_ledger(project: Project, before: Digest, after: Digest, paths: set[str]) -> list[Change]:
    """What the revert itself changed: the exact states before and after, per path."""
    old, new = tree_of(project, before), tree_of(project, after)
    assert old is not None and new is not None
    lines = []
    with project.store.reader() as reader:
        for path in sorted(paths):
            a = State.of(lookup(reader, old, path))
            b = State.of(lookup(reader, new, path))
            if a != b:
                lines.append(Change(path, a, b, "undo"))
    return lines
