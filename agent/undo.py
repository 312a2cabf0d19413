"""Undo and redo: revert batches path by path, proving every deletion.

``undo N`` takes the session's last N undoable batches (tool-call batches
that changed something and are not undone; undo/redo/rewind batches and
batches that changed nothing are stepped over). For each path their ledgers
name, the earliest batch's *before* is restored if and only if the disk still
holds the latest batch's *after*; otherwise the path is a conflict, skipped
and reported (``--force`` overwrites, never deletes). A path is deleted only
when its before-state was "absent", the change was made by a call (not found
by a restage or the watcher), and the disk still holds what the batch left
(promise 2). Directories the undone batches created are removed when empty.

Before changing anything, the current state of every path it will touch is
recorded; the undo itself becomes a batch (self-created), which is what
``redo`` replays backwards.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.lookup import is_dir, lookup
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.restore import Applier, RestorePlan
from earshot.cas.tree import Kind, TreeEntry

from .engine import Engine, record_batch
from .records import Batch, BatchKind, Change, State, get_batch, put_batch, session_batches


class NothingToUndo(EarshotError):
    def __init__(self, what: str) -> None:
        super().__init__(f"nothing to {what} in this session (see 'earshot log')")


class TooFewBatches(EarshotError):
    """``undo N`` with N above the batches left to undo: refused, nothing changed."""

    def __init__(self, asked: int, available: int) -> None:
        these = "batch is" if available == 1 else "batches are"
        super().__init__(
            f"only {available} {these} left to undo in this session, not {asked} "
            f"('earshot undo {available}' undoes them all; see 'earshot log')"
        )
        self.asked = asked
        self.available = available


class UndoInProgress(EarshotError):
    def __init__(self) -> None:
        super().__init__("another undo, redo or rewind is running on this project; try again")


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


@contextmanager
def project_lock(project: Project) -> Iterator[None]:
    """One undo/redo/rewind at a time per project; a second is refused at once."""
    fd = os.open(project.store_dir / "undo.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UndoInProgress() from None
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class _Step:
    """One path: from what the disk should hold, back to what it held."""

    path: str
    expect: State | None
    restore_to: State | None
    by_call: bool


def _steps(batches: list[Batch]) -> list[_Step]:
    """Per path: the earliest batch's before, the latest batch's after."""
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    for batch in sorted(batches, key=lambda b: b.seq):
        for line in batch.ledger:
            first.setdefault(line.path, line)
            last[line.path] = line
    return [
        _Step(path, last[path].after, first[path].before, isinstance(first[path].by, int))
        for path in sorted(first)
    ]


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


def _same(a: State | None, b: State | None) -> bool:
    return a == b


class Reverter:
    """Plans and applies the reversal of a set of ledger steps."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.project = engine.project

    def run(
        self,
        steps: list[_Step],
        anchor_tree: Digest | None,
        impact: Impact,
        force: bool,
        dry_run: bool,
        deletions_need_call: bool,
    ) -> tuple[Digest, Digest] | None:
        """Revert ``steps``; return (snapshot before, snapshot after) unless dry run.

        ``anchor_tree`` is the tree before the earliest reverted batch: it
        tells which directories existed then (to recreate or remove).
        """
        paths = {s.path for s in steps}
        now = self.project.record(sorted(paths), note="before undo", listed=False)
        plan = RestorePlan()
        with self.project.store.reader() as reader:
            for step in steps:
                current = State.of(lookup(reader, now.snapshot.tree, step.path))
                if _blocked(reader, now.snapshot.tree, step.path):
                    # Changed since the batch in the way that matters most: a
                    # parent is now a link (never written through) or a file.
                    impact.conflicts.append(step.path)
                    continue
                if _same(current, step.restore_to):
                    continue
                if step.restore_to is None:
                    if not step.by_call and deletions_need_call:
                        impact.kept.append((step.path, "not made by a call of this session; kept"))
                    elif not _same(current, step.expect):
                        impact.conflicts.append(step.path)
                    elif current is not None:
                        plan.deletes.append((step.path, _entry(step.path, current)))
                        impact.deleted.append(step.path)
                    continue
                if not _same(current, step.expect) and not force:
                    impact.conflicts.append(step.path)
                    continue
                plan.writes.append((step.path, _entry(step.path, step.restore_to)))
                impact.restored.append(step.path)
                self._parents(reader, now.snapshot.tree, anchor_tree, step.path, plan)
            for path in impact.deleted:
                self._created_dirs(reader, now.snapshot.tree, anchor_tree, path, plan)
        impact.removed_dirs = sorted(set(plan.rmdirs))
        if dry_run:
            return None
        with self.project.store.reader() as blobs:
            result = Applier(str(self.project.root), blobs, "undo").apply(plan)
        for path, reason in result.skipped:
            impact.kept.append((path, reason))
            if path in impact.restored:
                impact.restored.remove(path)
            if path in impact.deleted:
                impact.deleted.remove(path)
        impact.removed_dirs = result.removed_dirs
        touched = sorted(paths | set(result.removed_dirs) | set(result.created_dirs))
        after = self.project.record(
            touched, base=now.snapshot.tree, note="after undo", listed=False
        )
        return now.digest, after.digest

    def _parents(
        self, reader: ObjectReader, now: Digest, anchor: Digest | None, path: str, plan: RestorePlan
    ) -> None:
        """Directories a restored path needs, as they were before the batches."""
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/".join(parts[:depth])
            if any(p == parent for p, _ in plan.mkdirs) or is_dir(reader, now, parent):
                continue
            old = lookup(reader, anchor, parent) if anchor is not None else None
            mode = old.mode if old is not None and old.kind is Kind.DIR else 0o755
            name = parts[depth - 1].encode("utf-8", "surrogateescape")
            plan.mkdirs.append((parent, TreeEntry(name, Kind.DIR, mode, 0, None)))

    def _created_dirs(
        self, reader: ObjectReader, now: Digest, anchor: Digest | None, path: str, plan: RestorePlan
    ) -> None:
        """Parents of a deleted path that did not exist before the batches."""
        parts = path.split("/")[:-1]
        for depth in range(len(parts), 0, -1):
            parent = "/".join(parts[:depth])
            existed = anchor is not None and is_dir(reader, anchor, parent)
            if existed:
                break
            if parent not in plan.rmdirs:
                plan.rmdirs.append(parent)


def undo(engine: Engine, count: int = 1, force: bool = False, dry_run: bool = False) -> Impact:
    """Revert the session's last ``count`` undoable batches."""
    with project_lock(engine.project):
        candidates = [b for b in _history(engine) if b.undoable]
        if not candidates:
            raise NothingToUndo("undo")
        if count > len(candidates):
            raise TooFewBatches(count, len(candidates))
        call: dict[str, object] = {"tool": "undo", "count": count}
        return _revert(engine, candidates[-count:], BatchKind.UNDO, call, force, dry_run)


def undo_batches(
    engine: Engine,
    seqs: list[int],
    force: bool = False,
    dry_run: bool = False,
    kind: BatchKind = BatchKind.REWIND,
) -> Impact:
    """Revert the named batches of the session that are still undoable (rewind --code).

    Batches already undone, self-created or that changed nothing are passed
    over; with none left, NothingToUndo: there is nothing to restore.
    """
    wanted = set(seqs)
    with project_lock(engine.project):
        targets = [b for b in _history(engine) if b.seq in wanted and b.undoable]
        if not targets:
            raise NothingToUndo("restore")
        call: dict[str, object] = {"tool": kind.value, "batches": sorted(wanted)}
        return _revert(engine, targets, kind, call, force, dry_run)


def _history(engine: Engine) -> list[Batch]:
    with engine.project.store.backend.read() as view:
        return session_batches(view, engine.session.id)


def _revert(
    engine: Engine,
    targets: list[Batch],
    kind: BatchKind,
    call: dict[str, object],
    force: bool,
    dry_run: bool,
) -> Impact:
    """Revert ``targets`` (in seq order) and record it as a batch of ``kind``."""
    project = engine.project
    impact = Impact(batches=[b.seq for b in reversed(targets)])
    anchor = _tree_of(project, targets[0].before)
    if not dry_run:
        engine.begin_own_changes()
    outcome = Reverter(engine).run(_steps(targets), anchor, impact, force, dry_run, True)
    if outcome is None:
        return impact
    engine.end_own_changes()
    before, after = outcome
    ledger = _self_ledger(project, before, after, impact)
    seqs = tuple(b.seq for b in targets)
    batch = record_batch(project, engine, kind, (call,), before, after, ledger, False, seqs)
    # A batch with a path left in conflict (or kept) is not undone yet: a
    # retry, e.g. with --force, must still find it.
    left = set(impact.conflicts) | {p for p, _ in impact.kept}
    done = [b.seq for b in targets if not any(c.path in left for c in b.ledger)]
    _mark(project, engine.session.id, done, undone_by=batch.seq)
    impact.record = batch.seq
    return impact


def redo(engine: Engine, force: bool = False, dry_run: bool = False) -> Impact:
    """Replay the most recent undo (or rewind) that has not been redone."""
    project = engine.project
    with project_lock(project):
        with project.store.backend.read() as view:
            history = session_batches(view, engine.session.id)
        undos = [
            b
            for b in history
            if b.kind in (BatchKind.UNDO, BatchKind.REWIND) and b.redone_by is None
        ]
        if not undos:
            raise NothingToUndo("redo")
        last = undos[-1]
        impact = Impact(batches=list(last.targets))
        steps = [_Step(c.path, c.after, c.before, True) for c in last.ledger]
        anchor = _tree_of(project, last.before)
        if not dry_run:
            engine.begin_own_changes()
        outcome = Reverter(engine).run(steps, anchor, impact, force, dry_run, False)
        if outcome is None:
            return impact
        engine.end_own_changes()
        before, after = outcome
        ledger = _self_ledger(project, before, after, impact)
        batch = record_batch(
            project,
            engine,
            BatchKind.REDO,
            ({"tool": "redo"},),
            before,
            after,
            ledger,
            False,
            (last.seq,),
        )
        _mark(project, engine.session.id, list(last.targets), undone_by=None)
        _mark_redone(project, engine.session.id, last.seq, batch.seq)
        impact.record = batch.seq
        return impact


def _tree_of(project: Project, snapshot: Digest | None) -> Digest | None:
    if snapshot is None:
        return None
    return project.read_snapshot(snapshot).tree


def _self_ledger(project: Project, before: Digest, after: Digest, impact: Impact) -> list[Change]:
    """What the undo/redo itself changed: the exact states before and after."""
    old, new = _tree_of(project, before), _tree_of(project, after)
    assert old is not None and new is not None
    lines = []
    with project.store.reader() as reader:
        for path in sorted(set(impact.restored) | set(impact.deleted)):
            a = State.of(lookup(reader, old, path))
            b = State.of(lookup(reader, new, path))
            if a != b:
                lines.append(Change(path, a, b, "undo"))
    return lines


def _mark(project: Project, session: str, seqs: list[int], undone_by: int | None) -> None:
    with project.store.backend.write() as txn:
        for seq in seqs:
            batch = get_batch(txn, session, seq)
            if batch is not None:
                put_batch(txn, replace(batch, undone_by=undone_by))


def _mark_redone(project: Project, session: str, seq: int, redone_by: int) -> None:
    with project.store.backend.write() as txn:
        batch = get_batch(txn, session, seq)
        if batch is not None:
            put_batch(txn, replace(batch, redone_by=redone_by))
