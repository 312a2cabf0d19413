"""Planning and applying a reversal: ledger steps back to the states before them.

A *reversal* is what an undo, redo or rewind takes back: per path, what the
disk should hold now (the latest batch's after) and what to bring back (the
earliest batch's before). ``Reverter.plan`` checks each step against the disk
as just recorded and sorts it: restored, deleted, a conflict, or kept on
purpose (not made by a call, not held by earshot). ``Reverter.apply`` carries
out a verified plan through ``cas.apply`` and records the state after.
The rules (promises 2, 3 and 8): a path is deleted only when its state before
was "absent", a call of the session made it, the disk still holds what the
batch left, and (for a change made while another session ran) only with
``--force``; a path is overwritten only when the disk holds what the batches
left, or with ``--force``; a path whose state earshot does not hold is never
touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, Change, State
from earshot.agent.core.ledger import state_in
from earshot.agent.core.moves import (
    find_moves,
    ident_now,
    inode_now,
    older_than,
    still_there,
    unchanged,
    vanished_inodes,
)
from earshot.cas.apply import DIR_IN_THE_WAY, DIR_NOT_EMPTY, Applier
from earshot.cas.digest import Digest
from earshot.cas.intents import Held
from earshot.cas.lookup import is_dir, lookup
from earshot.cas.objects import ObjectReader
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.restore import RestorePlan
from earshot.cas.tree import Kind, TreeEntry

#: Why undo keeps a created file whose content a conflicted path was to get back.
MOVED_HALF = "holds what a path in conflict was to get back (the other half of a move); kept"
#: Why undo keeps a created path it cannot prove a call made: final, no retry
#: (not even --force) would delete it.
NOT_BY_A_CALL = "not made by a call of this session; kept"


def not_held_before(state: State) -> str:
    """A path whose state before the batch earshot never held (over the size limit,
    ignored and not kept, unreadable, a FIFO): it cannot be brought back, and is
    not touched."""
    return f"its content before was not recorded ({why_unrecorded(state)}); kept"


def not_held_now(state: State) -> str:
    """A path present now whose content earshot does not hold: never overwritten or deleted."""
    return f"its content now is not recorded ({why_unrecorded(state)}); left alone"


#: A created file older than the batches, whose content nothing the undo writes
#: back holds: moved in from where earshot does not look (a cache, outside the
#: root) or unpacked with its old times (``tar x``, ``cp -p``). Its only copy
#: may be this one, so it is kept.
CAME_FROM_ELSEWHERE = (
    "older than the batch and not held elsewhere: it may have come from where "
    "earshot does not look (a cache, outside the root); kept"
)
#: File systems that keep coarse times (2 s on FAT), and clocks a little apart.
_MTIME_SLACK = 2_000_000_000


def maybe_moved(source: str) -> str:
    """A created file holding the inode of one not held that vanished: not deleted."""
    return f"it holds the inode {source} had (not held): moved here and changed since; kept"


def why_unrecorded(state: State) -> str:
    """Why a state's content is not held, in words."""
    reason = WHY_UNRECORDED.get(state.reason or "", state.reason or "not recorded")
    return f"{reason}, in {state.under}/" if state.under else reason


#: Why a path's content is not held, by its reason (``State.reason``).
WHY_UNRECORDED = {
    "too_large": "over the size limit",
    "unreadable": "unreadable",
    "special": "a special file",
    "too_deep": "too deep",
    "ignored": "ignored, over the limits for ignored files",
    "cache": "ignored, a regenerable cache",
    "excluded": "excluded by .earshotignore",
    "build": "ignored, a build output",
}


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
    #: (from, to): entries whose content is not held, moved back by a rename.
    moved: list[tuple[str, str]] = field(default_factory=list)
    #: Kept paths no retry would change (not made by a call, not held, a
    #: directory holding what is not the batches'): they do not keep a batch open.
    final: set[str] = field(default_factory=set)
    #: Asked with --force: a conflict left is one --force does not overwrite.
    forced: bool = False

    def keep(self, path: str, why: str, final: bool = True) -> None:
        """Leave ``path`` as it is, for ``why``; ``final``: no retry would do more."""
        self.kept.append((path, why))
        if final:
            self.final.add(path)


@dataclass(frozen=True, slots=True)
class Step:
    """One path: from what the disk should hold, back to what it held."""

    path: str
    expect: State | None
    restore_to: State | None
    by_call: bool
    #: A batch of another session ran beside it: the change may be that one's.
    ambiguous: bool = False
    #: For a redo: where an undo moved the entry at this path by a rename.
    moved: str | None = None


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
    #: When the state before the earliest reverted batch was recorded (0: not
    #: known): a created file older than that did not begin in the batches.
    since_ns: int = 0


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
        since_ns=project.read_snapshot(targets[0].before).time_ns if targets[0].before else 0,
    )


def redo_reversal(project: Project, undone: Batch) -> Reversal:
    """Replay what the undo (or rewind) ``undone`` took back."""
    return Reversal(
        kind=BatchKind.REDO,
        steps=[Step(c.path, c.after, c.before, by_call=True, moved=c.moved) for c in undone.ledger],
        anchor_tree=tree_of(project, undone.before),
        targets=(undone.seq,),
        call={"tool": "redo"},
        deletions_need_call=False,
        shown=list(undone.targets),
    )


def temp_dirs(paths: list[str]) -> list[str]:
    """The directories a revert of ``paths`` may write temp files into."""
    return sorted({p.rpartition("/")[0] for p in paths})


def _blocked(reader: ObjectReader, tree: Digest, path: str, becoming: set[str]) -> bool:
    """Whether an ancestor of ``path`` exists but is not a directory (a link, a file).

    An absent ancestor is fine: undo recreates it; so is one the reversal
    turns back into a directory (``becoming``). One that is a link must
    never be written through, nor hide a path undo should report. One kept
    as existence only is not in the way: the path's state says so.
    """
    parts = path.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        ancestor = "/".join(parts[:depth])
        entry = lookup(reader, tree, ancestor)
        if entry is None or entry.kind is Kind.UNRECORDED:
            return False
        if entry.kind is not Kind.DIR and ancestor not in becoming:
            return True
    return False


def _entry(path: str, state: State) -> TreeEntry:
    name = path.rpartition("/")[2].encode("utf-8", "surrogateescape")
    return TreeEntry(name, state.kind, state.mode, 0, state.digest)


#: What the progress calls applying each kind of reversal.
_DOING = {"undo": "undoing", "redo": "redoing", "rewind": "rewinding"}


def _counted(steps: list[Step], progress: Progress) -> Iterator[Step]:
    """The steps, each told to ``progress`` once the loop is done with it."""
    for step in steps:
        yield step
        progress.advance()


class Reverter:
    """Plans and applies the reversal of a set of ledger steps."""

    def __init__(self, project: Project, progress: Progress = QUIET) -> None:
        self.project = project
        self.progress = progress

    def plan(
        self, rev: Reversal, now_tree: Digest | None, impact: Impact, force: bool
    ) -> RestorePlan:
        """The plan to revert ``rev`` over ``now_tree``; fills ``impact`` as it goes."""
        plan = RestorePlan()
        if now_tree is None:
            return plan
        mkdirs: set[str] = set()
        with self.project.store.reader() as reader:
            currents = {s.path: state_in(reader, now_tree, s.path) for s in rev.steps}
            moves = find_moves(self.project.root, rev.steps, currents)
            back = set(moves.values())
            vanished = vanished_inodes(rev.steps, currents, back)
            # What the reversal writes back: a created file holding it is the
            # other half of a move within what is held (``mv a b``).
            brought_back = {
                s.restore_to.digest
                for s in rev.steps
                if s.restore_to is not None and s.restore_to.digest is not None
            }
            # A directory moved back carries what the batches put below it.
            carried = tuple(f"{path}/" for path, source in moves.items() if path not in currents)
            # Directories the reversal makes again where a file or link stands
            # now (a directory the batches replaced): not in the way of their paths.
            becoming = {
                s.path
                for s in rev.steps
                if s.restore_to is not None
                and s.restore_to.kind is Kind.DIR
                and (c := currents[s.path]) is not None
                and c.recorded
                and c.kind is not Kind.DIR
                and (c == s.expect or force)
            }
            for dst, source in moves.items():
                if dst not in currents:  # a directory found by its identity
                    self._parents(reader, now_tree, rev.anchor_tree, source, plan, mkdirs)
                    plan.renames.append((dst, source, ident_now(self.project.root, dst)))
                    impact.moved.append((dst, source))
            self.progress.stage("checking", total=len(rev.steps))
            for step in _counted(rev.steps, self.progress):
                current = currents[step.path]
                if carried and step.path.startswith(carried):
                    continue  # it goes back with the directory that holds it
                if _blocked(reader, now_tree, step.path, becoming):
                    # Changed since the batch in the way that matters most: a
                    # parent is now a link (never written through) or a file.
                    impact.conflicts.append(step.path)
                    continue
                if step.path in back:
                    continue  # comes back by the rename of where it went
                if step.path in moves:
                    if step.ambiguous and not force:
                        impact.conflicts.append(step.path)
                        impact.ambiguous.append(step.path)
                        continue
                    source = moves[step.path]
                    self._parents(reader, now_tree, rev.anchor_tree, source, plan, mkdirs)
                    plan.renames.append(
                        (step.path, source, ident_now(self.project.root, step.path))
                    )
                    impact.moved.append((step.path, source))
                    if step.restore_to is not None:  # a file the move replaced comes back
                        plan.write(step.path, _entry(step.path, step.restore_to), None)
                        impact.restored.append(step.path)
                    continue
                if current == step.restore_to:
                    continue
                # What earshot does not hold, it does not touch (promise 8).
                if step.restore_to is not None and not step.restore_to.recorded:
                    if not still_there(self.project.root, step.path, step.restore_to):
                        impact.keep(step.path, not_held_before(step.restore_to))
                    continue
                if current is not None and not current.recorded:
                    impact.keep(step.path, not_held_now(current))
                    continue
                if step.restore_to is None:
                    was = vanished.get(inode_now(self.project.root, step.path) or -1)
                    if was is not None and current is not None and current.kind is Kind.FILE:
                        impact.keep(step.path, maybe_moved(was))
                        continue
                    if (
                        current is not None
                        and current.kind is Kind.FILE
                        and current.digest not in brought_back
                        and older_than(self.project.root, step.path, rev.since_ns - _MTIME_SLACK)
                    ):
                        impact.keep(step.path, CAME_FROM_ELSEWHERE)
                        continue
                    self._plan_delete(rev, step, current, plan, impact, force)
                    continue
                if not unchanged(self.project.root, step.path, current, step.expect) and not force:
                    impact.conflicts.append(step.path)
                    continue
                self._parents(reader, now_tree, rev.anchor_tree, step.path, plan, mkdirs)
                entry = _entry(step.path, step.restore_to)
                if step.restore_to.kind is Kind.DIR:
                    if current is not None and current.kind is not Kind.DIR:
                        # A file or link where the directory was: it goes (its
                        # state is recorded before), and the directory comes back.
                        plan.deletes.append((step.path, _entry(step.path, current)))
                        current = None
                    if current is None and step.path not in mkdirs:
                        plan.mkdirs.append((step.path, entry))
                        mkdirs.add(step.path)
                    elif current is not None:
                        plan.chmods.append((step.path, entry))
                    impact.restored.append(step.path)
                    continue
                if current is not None and current.kind is Kind.DIR:
                    # A directory where the file was: removed once what the
                    # batches put in it is gone, then the file written.
                    plan.rmdirs.append(step.path)
                    current = None
                plan.write(
                    step.path, entry, None if current is None else _entry(step.path, current)
                )
                impact.restored.append(step.path)
            self._keep_what_a_conflict_needs(rev, plan, impact)
            rmdirs: set[str] = set(plan.rmdirs)
            for path in impact.deleted + [source for source, _ in impact.moved]:
                self._created_dirs(reader, rev.anchor_tree, path, plan, rmdirs)
            for step in rev.steps:
                if self._made_and_gone(rev, step, currents[step.path], force):
                    parent = step.path.rpartition("/")[0]
                    if parent and is_dir(reader, now_tree, parent):
                        self._created_dirs(reader, rev.anchor_tree, step.path, plan, rmdirs)
        self._keep_dirs_left_full(plan, impact)
        impact.removed_dirs = sorted(plan.rmdirs)
        return plan

    def _keep_dirs_left_full(self, plan: RestorePlan, impact: Impact) -> None:
        """A directory to remove that will still hold something (a conflict, a kept
        path, what the batches never saw) is kept, as applying would find: so a
        dry run says what the undo will do."""
        leaving = {path for path, _ in plan.deletes} | {src for src, _, _ in plan.renames}
        arriving = {path for path, _ in plan.mkdirs} | {dst for _, dst, _ in plan.renames}
        for path in sorted(plan.rmdirs, key=lambda p: -p.count("/")):  # as applied
            try:
                names = os.listdir(os.path.join(self.project.root, path))
            except OSError:
                continue  # gone, or not a directory: applying says why
            held = [n for n in names if f"{path}/{n}" not in leaving]
            if held or any(p.startswith(f"{path}/") for p in arriving):
                plan.rmdirs.remove(path)
                impact.keep(path, DIR_NOT_EMPTY)
                # A file that was to replace it is not written either.
                plan.writes = [(p, e) for p, e in plan.writes if p != path]
                for listed in (impact.deleted, impact.restored):
                    if path in listed:
                        listed.remove(path)
            else:
                leaving.add(path)

    @staticmethod
    def _keep_what_a_conflict_needs(rev: Reversal, plan: RestorePlan, impact: Impact) -> None:
        """A created file holding what a conflicted path was to get back (the other half
        of a move whose source is taken now) is not deleted: it may be the only copy
        on disk."""
        wanted = {
            s.restore_to.digest
            for s in rev.steps
            if s.path in impact.conflicts and s.restore_to is not None and s.restore_to.digest
        }
        if not wanted:
            return
        kept = [(path, entry) for path, entry in plan.deletes if entry.digest in wanted]
        for path, _entry_kept in kept:
            plan.deletes.remove((path, _entry_kept))
            impact.deleted.remove(path)
            impact.keep(path, MOVED_HALF, final=False)

    @staticmethod
    def _plan_delete(
        rev: Reversal,
        step: Step,
        current: State | None,
        plan: RestorePlan,
        impact: Impact,
        force: bool,
    ) -> None:
        """A path the batches created: deleted only when proven (promise 2)."""
        if not step.by_call and rev.deletions_need_call:
            impact.keep(step.path, NOT_BY_A_CALL)
        elif current != step.expect:
            impact.conflicts.append(step.path)
        elif step.ambiguous and not force:
            # Another session's batch ran at the same time and may have made
            # it: deleted only with --force.
            impact.conflicts.append(step.path)
            impact.ambiguous.append(step.path)
        elif current is not None and current.kind is Kind.DIR:
            plan.rmdirs.append(step.path)  # only if still empty then
            impact.deleted.append(step.path)
        elif current is not None:
            plan.deletes.append((step.path, _entry(step.path, current)))
            impact.deleted.append(step.path)

    def apply(self, plan: RestorePlan, now_tree: Digest, impact: Impact, held: Held) -> Digest:
        """Carry out a verified plan; record and return the snapshot after it."""
        with self.project.store.reader() as blobs:
            applier = Applier(str(self.project.root), blobs, held.id, self.progress)
            result = applier.apply(
                plan, verified=True, label=_DOING.get(held.intent.kind, "applying")
            )
        for path, reason in result.skipped:
            # A directory that holds what is not the batches' stays, and so
            # does the file that cannot replace it: no retry would do more.
            impact.keep(path, reason, final=reason in (DIR_NOT_EMPTY, DIR_IN_THE_WAY))
            if path in impact.restored:
                impact.restored.remove(path)
            if path in impact.deleted:
                impact.deleted.remove(path)
            impact.moved = [(a, b) for a, b in impact.moved if b != path]
        impact.removed_dirs = result.removed_dirs
        touched = {p for p, _ in plan.writes + plan.deletes}
        touched |= set(result.removed_dirs) | set(result.created_dirs)
        moved = {p for pair in result.moved for p in pair}
        # Forced, as the state before was: a path a ledger names is recorded
        # whatever the ignore rules say (a .env ignored since stays held).
        # What was moved back is not held: judged by the rules, as it was.
        after = self.project.record(
            sorted(touched | moved),
            base=now_tree,
            note="after undo",
            listed=False,
            forced=touched,
            progress=self.progress,
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

    @staticmethod
    def _made_and_gone(rev: Reversal, step: Step, current: State | None, force: bool) -> bool:
        """A path a call of the batches made and the batches took away again (written,
        then moved out): no step of its own is left to revert, but the directories
        made for it are still the batches' (absent before them, found by
        ``_created_dirs``; removed only if empty then)."""
        return (
            step.restore_to is None
            and step.expect is None
            and current is None
            and (step.by_call or not rev.deletions_need_call)
            and (not step.ambiguous or force)
        )

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
