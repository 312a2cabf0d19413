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

Undo, redo and rewind share one path (``_revert``): record the current state
of every path it will touch, plan, commit an intent (reserving the batch's
number), apply, record the state after, and commit the batch with the marks
it sets (``undone_by``/``redone_by``) and the intent's end in one
transaction. A revert cut off at any instant is finished by the next command
(``finish_revert``): it runs again from the state it left, and its batch
spans from the state before the first attempt, so a redo brings back
everything, both attempts' work included.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, State
from earshot.agent.core.commit import Draft
from earshot.agent.core.engine import Engine
from earshot.agent.core.external_open import close_idle
from earshot.agent.core.records import get_batch, session_batches
from earshot.agent.core.reversal import (
    Impact,
    Reversal,
    Reverter,
    redo_reversal,
    self_ledger,
    temp_dirs,
    tree_of,
    undo_reversal,
)
from earshot.cas import faults
from earshot.cas.apply import remove_temp_files, verify_plan
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held
from earshot.cas.lookup import is_dir, lookup
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.tree import Kind


class NothingToUndo(EarshotError):
    def __init__(self, what: str) -> None:
        super().__init__(f"nothing to {what} in this session (see 'earshot log')")


class UndoInProgress(EarshotError):
    def __init__(self) -> None:
        super().__init__("another undo, redo or rewind is running on this project; try again")


class DamagedIntent(EarshotError):
    """An interrupted operation's record is damaged: it may be a batch undo must not skip."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} is damaged, and it may be a batch of this session: undo and redo wait "
            "('earshot fsck --repair' sets it aside; what it changed then stays as it is)"
        )


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


class NotRecordedYet(EarshotError):
    """A batch of the session ran but is not recorded: undo must not step over it."""

    def __init__(self, seq: int, live: bool) -> None:
        why = (
            "is running in another process right now"
            if live
            else "ran, but its process was interrupted before recording it, and it could "
            "not be recorded since (the line above says why: a full disk, a damaged store "
            "that 'earshot fsck' lists)"
        )
        super().__init__(
            f"batch {seq} of this session {why}; undo and redo wait for it rather than step over it"
        )
        self.seq = seq


@contextmanager
def project_lock(project: Project) -> Iterator[None]:
    """One undo/redo/rewind at a time per project; a second is refused at once."""
    fd = os.open(project.store_dir / "undo.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UndoInProgress() from None
        yield
    finally:
        os.close(fd)


def _history(engine: Engine) -> list[Batch]:
    """The session's batches, their ledgers only counted: the revert reads the
    ledgers of just the batches it reverts."""
    with engine.project.store.backend.read() as view:
        return session_batches(view, engine.session.id, ledgers=False)


def _full(engine: Engine, batches: list[Batch]) -> list[Batch]:
    """The same batches with their ledgers."""
    found = _batches(engine, [b.seq for b in batches])
    return [found[b.seq] for b in batches if b.seq in found]


def _marks(
    rev: Reversal, history: Mapping[int, Batch], impact: Impact
) -> Callable[[int], dict[int, dict[str, Any]]]:
    """The marks the revert's batch sets, in its own transaction, given its number."""

    def marks(seq: int) -> dict[int, dict[str, Any]]:
        if rev.kind is BatchKind.REDO:
            undone = history[rev.targets[0]]
            out: dict[int, dict[str, Any]] = {t: {"undone_by": None} for t in undone.targets}
            out[undone.seq] = {"redone_by": seq}
            return out
        # A batch with a path left in conflict (or kept by a failed write) is
        # not undone yet: a retry, e.g. with --force, must still find it. A path
        # kept for good (not made by a call, not held, a directory holding what
        # is not the batch's) stays kept whatever is retried: the undo did all
        # it can for it, and the batch is done.
        left = set(impact.conflicts) | {p for p, _ in impact.kept if p not in impact.final}
        return {
            t: {"undone_by": seq}
            for t in rev.targets
            if not any(c.path in left for c in history[t].ledger)
        }

    return marks


def refuse_if_unrecorded(engine: Engine) -> None:
    """Undo must never step over a batch of its session that is not recorded yet."""
    intents = engine.project.intents
    for intent in intents.pending():
        if intent.doc.get("session") == engine.session.id and "seq" in intent.doc:
            raise NotRecordedYet(int(intent.doc["seq"]), intents.is_live(intent))
    damaged = intents.damaged()
    if damaged:  # it may be a batch of this session: whose, no one can tell
        raise DamagedIntent(damaged[0][1].what)


def undo(
    engine: Engine,
    count: int = 1,
    *,
    force: bool = False,
    dry_run: bool = False,
    progress: Progress = QUIET,
) -> Impact:
    """Revert the session's last ``count`` undoable batches (``progress`` hears how far)."""
    with project_lock(engine.project):
        if not dry_run:
            # An agent's batch left open with no call running (the agent waits
            # for the person, who asks for the undo) is committed first.
            close_idle(engine, "an undo was asked")
        refuse_if_unrecorded(engine)
        candidates = [b for b in _history(engine) if b.undoable]
        if not candidates:
            raise NothingToUndo("undo")
        if count > len(candidates):
            raise TooFewBatches(count, len(candidates))
        call: dict[str, Any] = {"tool": "undo", "count": count}
        rev = undo_reversal(
            engine.project, _full(engine, candidates[-count:]), BatchKind.UNDO, call
        )
        return _revert(engine, rev, force=force, dry_run=dry_run, progress=progress)


def undo_batches(
    engine: Engine,
    seqs: list[int],
    *,
    force: bool = False,
    dry_run: bool = False,
    kind: BatchKind = BatchKind.REWIND,
    then: Held | None = None,
    progress: Progress = QUIET,
) -> Impact:
    """Revert the named batches of the session that are still undoable (rewind --code).

    Batches already undone, self-created or that changed nothing are passed
    over; with none left, NothingToUndo: there is nothing to restore.
    ``then``: an intent (made, not committed) that replaces this one at its
    commit: what must still happen after it, such as a rewind's navigation.
    """
    wanted = set(seqs)
    with project_lock(engine.project):
        refuse_if_unrecorded(engine)
        targets = [b for b in _history(engine) if b.seq in wanted and b.undoable]
        if not targets:
            raise NothingToUndo("restore")
        call: dict[str, Any] = {"tool": kind.value, "batches": sorted(wanted)}
        rev = undo_reversal(engine.project, _full(engine, targets), kind, call)
        return _revert(engine, rev, force=force, dry_run=dry_run, then=then, progress=progress)


def redo(
    engine: Engine, *, force: bool = False, dry_run: bool = False, progress: Progress = QUIET
) -> Impact:
    """Replay the most recent undo (or rewind) that has not been redone."""
    with project_lock(engine.project):
        if not dry_run:
            close_idle(engine, "a redo was asked")
        refuse_if_unrecorded(engine)
        undos = [
            b
            for b in _history(engine)
            if b.kind in (BatchKind.UNDO, BatchKind.REWIND) and b.redone_by is None
        ]
        if not undos:
            raise NothingToUndo("redo")
        (last,) = _full(engine, undos[-1:])
        rev = redo_reversal(engine.project, last)
        return _revert(engine, rev, force=force, dry_run=dry_run, progress=progress)


def finish_revert(
    engine: Engine, held: Held, then: Held | None = None, progress: Progress = QUIET
) -> Impact:
    """Finish an undo, redo or rewind whose process died (its intent, claimed).

    The revert is worked out again from the records it names and runs from
    the state the tree is in now; its batch spans from the state recorded
    before the first attempt, so redo brings back both attempts' work.
    ``then``: the follow-up the first attempt had planned (remade by the caller).
    """
    doc = held.intent.doc
    kind = BatchKind(held.intent.kind)
    targets = [int(t) for t in doc.get("targets", [])]
    with project_lock(engine.project):
        history = _batches(engine, targets)
        if kind is BatchKind.REDO:
            rev = redo_reversal(engine.project, history[targets[0]])
        else:
            batches = [history[t] for t in targets if t in history]
            rev = undo_reversal(engine.project, batches, kind, dict(doc.get("call", {})))
        return _revert(
            engine,
            rev,
            force=bool(doc.get("force")),
            dry_run=False,
            resume=held,
            then=then,
            progress=progress,
        )


def _revert(
    engine: Engine,
    rev: Reversal,
    *,
    force: bool,
    dry_run: bool,
    resume: Held | None = None,
    then: Held | None = None,
    progress: Progress = QUIET,
) -> Impact:
    """Revert ``rev`` and record it as a batch of its kind (see the module docstring)."""
    project = engine.project
    impact = Impact(batches=list(rev.shown), forced=force)
    base, seen = engine.begin_own_changes() if not dry_run else (None, set())
    reverter = Reverter(engine.project, progress)
    paths = sorted({s.path for s in rev.steps})
    # Forced: a path whose content a ledger holds is recorded whatever the
    # ignore rules and limits say; one it held only as existence is judged
    # as a walk judges it (a moved 70 MiB file is not read).
    forced = [s.path for s in rev.steps if _held(s.expect) or _held(s.restore_to)]
    now = project.record(
        sorted(set(paths) | seen),
        base=base,
        note=f"before {rev.kind.value}",
        listed=False,
        forced=forced,
        progress=progress,
    )
    plan = reverter.plan(rev, now.snapshot.tree, impact, force)
    if dry_run:
        return impact
    with project.store.reader() as reader:
        verify_plan(reader, plan)  # a damaged store stops here, before the intent
    dirs = temp_dirs(paths)
    first_before = now.digest
    done_before: set[str] = set()
    earlier = Impact(batches=[])  # what a first, interrupted attempt set out to do
    if resume is None:
        held = engine.begin_intent(
            rev.kind.value,
            now.digest,
            {
                "targets": list(rev.targets),
                "call": rev.call,
                "force": force,
                "then": None if then is None else then.intent.to_json(),
            },
        )
    else:
        held = resume
        remove_temp_files(str(project.root), dirs, held.id)
        first_before = Digest(bytes.fromhex(str(held.intent.doc["before"])))
        # What the first attempt set out to do, worked out again from the
        # state it started from: the paths it reached are part of this batch.
        first_plan = reverter.plan(rev, tree_of(project, first_before), earlier, force)
        done_before = set(earlier.restored) | set(earlier.deleted)
        done_before |= {p for pair in earlier.moved for p in pair}
        # Directories it made may still lack their final mode (set last); the
        # directories it was to remove once empty may still be there, emptied
        # by the first attempt, so this attempt deletes nothing inside them.
        with project.store.reader() as reader:
            for path, entry in first_plan.mkdirs:
                made = lookup(reader, now.snapshot.tree, path)
                if made is not None and made.kind is Kind.DIR and made.mode != entry.mode:
                    plan.chmods.append((path, entry))
            planned = set(plan.rmdirs)
            for path in first_plan.rmdirs:
                if path not in planned and is_dir(reader, now.snapshot.tree, path):
                    plan.rmdirs.append(path)
    try:
        after = reverter.apply(plan, now.snapshot.tree, impact, held)
        faults.point("revert-applied")  # recorded, not yet committed as a batch
        engine.end_own_changes(project.read_snapshot(after).tree)
        done = set(impact.restored) | set(impact.deleted) | done_before
        done |= {p for pair in impact.moved for p in pair}
        if resume is not None:  # what both attempts did, as the batch will say
            left = set(impact.conflicts) | {p for p, _ in impact.kept}
            impact.restored = sorted((set(impact.restored) | set(earlier.restored)) - left)
            impact.deleted = sorted((set(impact.deleted) | set(earlier.deleted)) - left)
        moved = dict(impact.moved)  # what went where by a rename: redo moves it again
        ledger = [
            replace(c, moved=moved[c.path]) if c.path in moved else c
            for c in self_ledger(project, first_before, after, done)
        ]
        history = _batches(engine, _marked(rev, project, engine.session.id))
        draft = Draft(
            rev.kind,
            (rev.call,),
            first_before,
            after,
            ledger,
            targets=rev.targets,
            interrupted=resume is not None,
        )
        batch = engine.record(draft, held=held, marks=_marks(rev, history, impact), then=then)
    except BaseException:
        held.close()  # the intent stays: the next command finishes the revert
        raise
    impact.record = batch.seq
    return impact


def _held(state: State | None) -> bool:
    """Whether a ledger holds the content of a state (absent holds nothing)."""
    return state is not None and state.recorded


def _marked(rev: Reversal, project: Project, session: str) -> list[int]:
    """The batches whose records a revert's marks read: its targets, and a redo's undo's."""
    seqs = list(rev.targets)
    if rev.kind is BatchKind.REDO:
        with project.store.backend.read() as view:
            undone = get_batch(view, session, rev.targets[0])
        if undone is not None:
            seqs += list(undone.targets)
    return seqs


def _batches(engine: Engine, seqs: list[int]) -> dict[int, Batch]:
    """Some batches of the session, by number (not the whole history: ledgers are big)."""
    out = {}
    with engine.project.store.backend.read() as view:
        for seq in seqs:
            batch = get_batch(view, engine.session.id, seq)
            if batch is not None:
                out[seq] = batch
    return out
