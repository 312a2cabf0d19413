"""Changes made outside any call: by the person, another tool, or a process a
command left running, between one batch and the next.

Every batch that ends knowing the tree exactly, and ran beside no other
session's batch, leaves that state behind (``records.Settled``). When the
next batch begins on an exact picture of the tree (a walk, or the watch
daemon's word), what differs from the settled state changed outside any
call. So does what a restage between two calls of one batch finds. Either
is committed at once, before the call runs, as a batch of its own: one of
the pseudo-session ``outside``, undone by its number like any batch
(``earshot undo --session outside``), never by a session's undo. A change
made while a process group that a session's command left running is still
alive is that session's: a batch of it, or lines of the batch that left it
running. Nothing here changes a file; it only records.

What cannot be told apart is left as before: another session's batch
running, a tree not known exactly (no watcher and over the restage budget),
a process group already gone (its changes count as outside, and the message
names it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, Change
from earshot.agent.core.commit import Draft, Settles, commit_batch, others_running
from earshot.agent.core.coverage import quote
from earshot.agent.core.ledger import tree_changes
from earshot.agent.core.records import (
    OUTSIDE,
    SessionRecord,
    get_session,
    load_settled,
    others_ended_since,
)
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.project import Project, Recorded

#: Who made a change found between calls: no call (``Change.by``).
BY_OUTSIDE = "outside"
#: ... a process group a command of the batch left running, still alive.
BY_LEFT_RUNNING = "left running"


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by another user
    return True


def left_running(notes: Sequence[dict[str, Any]], index: int) -> int | None:
    """The process group of call ``index`` (from its intent's notes), if it still
    runs once the call has ended: a command left it running in the background."""
    for note in notes:
        if note.get("call") == index and isinstance(note.get("pgid"), int):
            pgid = int(note["pgid"])
            return pgid if group_alive(pgid) else None
    return None


def between(project: Project, old: Digest, new: Digest) -> list[Change]:
    """What changed from tree ``old`` to tree ``new``, as ledger lines of no call.

    A path only newly held (recorded now, kept as existence before: a write
    names it, or a rule began to hold it) is no change that can be told.
    """
    lines = tree_changes(project, old, new, by=BY_OUTSIDE)
    return [
        c
        for c in lines
        if not (
            c.before is not None
            and not c.before.recorded
            and c.after is not None
            and c.after.recorded
        )
    ]


class OutsideRecorder:
    """Records what changed outside any call, for one engine (its session and policy)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        #: The batches recorded since the engine's batch began: said with its outcome.
        self.recorded: list[Batch] = []
        #: Process groups this engine's batch left running, with their command.
        self.left: list[tuple[int, str]] = []

    def reset(self) -> None:
        self.recorded = []
        self.left = []

    def at_start(self, session: str, found: Recorded | None) -> Batch | None:
        """A batch is about to begin on ``found`` (the tree now, known exactly):
        record what changed since the settled state, if anything did."""
        if found is None:
            return None
        with self.project.store.backend.read() as view:
            settled = load_settled(view)
        if settled is None or settled.snapshot == found.digest:
            return None
        try:
            old = self.project.read_snapshot(settled.snapshot).tree
        except (EarshotError, OSError):
            return None  # collected or damaged: nothing to compare with
        if old == found.snapshot.tree or others_running(self.project, session, None):
            return None
        lines = between(self.project, old, found.snapshot.tree)
        if not lines:
            return None
        alive = [(g, c) for g, c in settled.left if group_alive(g)]
        owner = settled.session if alive and settled.session != OUTSIDE else OUTSIDE
        doc: dict[str, Any] = {"tool": "outside"}
        if alive:
            doc |= {
                "left_running": {
                    "batch": settled.seq,
                    "session": settled.session,
                    "commands": [c for _, c in alive],
                }
            }
        elif settled.left:
            doc["ended"] = {
                "batch": settled.seq,
                "session": settled.session,
                "commands": [c for _, c in settled.left],
            }
        return self._commit(owner, doc, settled.snapshot, found, lines, alive)

    def mid_batch(
        self,
        session: str,
        previous: Recorded | None,
        found: Recorded | None,
        ledger: list[Change] | None,
        started_ns: int,
    ) -> Batch | None:
        """A restage between two calls of a batch went from ``previous`` to ``found``
        (both exact): what changed is the batch's when a process group it left
        running still lives (lines added to ``ledger``), else outside any call.

        Unless another session's batch runs, or ran since this batch began
        (``started_ns``): what changed may be its, and two sessions at once
        cannot be told apart (its ledger marks them ambiguous).
        """
        if previous is None or found is None:
            return None
        if previous.snapshot.tree == found.snapshot.tree:
            return None
        with self.project.store.backend.read() as view:
            beside = others_ended_since(view, session, started_ns)
        if beside or others_running(self.project, session, None):
            return None
        lines = between(self.project, previous.snapshot.tree, found.snapshot.tree)
        if not lines:
            return None
        alive = [(g, c) for g, c in self.left if group_alive(g)]
        if alive and ledger is not None:
            ledger.extend(replace(c, by=BY_LEFT_RUNNING) for c in lines)
            return None
        return self._commit(OUTSIDE, {"tool": "outside"}, previous.digest, found, lines, [])

    def settles(self, draft: Draft, exact: Digest | None) -> Settles | None:
        """The state a batch about to commit leaves as settled (``commit_batch``).

        A batch of calls known exactly to its end (``exact``: the tree the
        engine believes is on disk, if it knows it exactly): its state after. Earshot's
        own (undo, redo, rewind) recorded the paths it changed on the state
        before it: its state after, while the state before it was settled
        (a change elsewhere since is still told at the next batch). Otherwise
        none: the tree is not known exactly, and the next batch tells nothing
        apart.
        """
        if draft.interrupted or draft.folded or draft.after is None:
            return None
        left = tuple((g, c) for g, c in self.left if group_alive(g))
        if exact is not None:
            try:
                if self.project.read_snapshot(draft.after).tree == exact:
                    return draft.after, left
            except (EarshotError, OSError):
                return None
        if not draft.kind.self_created:
            return None
        with self.project.store.backend.read() as view:
            settled = load_settled(view)
        return None if settled is None else (draft.after, settled.left)

    def _commit(
        self,
        owner: str,
        doc: dict[str, Any],
        before: Digest,
        found: Recorded,
        lines: list[Change],
        alive: list[tuple[int, str]],
    ) -> Batch:
        with self.project.store.backend.read() as view:
            record = get_session(view, owner)
        if record is None:
            now = time.time_ns()
            record = SessionRecord(owner, now, now)
        if owner != OUTSIDE:
            lines = [replace(c, by=BY_LEFT_RUNNING) for c in lines]
        draft = Draft(BatchKind.CALLS, (doc,), before, found.digest, lines)
        batch, _ = commit_batch(
            self.project,
            draft,
            session=record,
            held=None,
            started_ns=time.time_ns(),
            overlap=False,
            watch_mark=None,
            settles=(found.digest, tuple(alive)),
            between=True,
        )
        self.recorded.append(batch)
        return batch


def what_changed(batch: Batch, shown: int = 6) -> str:
    """``precious (deleted), notes.txt (changed)``: a batch's paths, for one line."""
    words = []
    for line in batch.ledger[:shown]:
        change = (
            "created" if line.before is None else "deleted" if line.after is None else "changed"
        )
        words.append(f"{quote(line.path)} ({change})")
    if len(batch.ledger) > shown:
        words.append(f"and {len(batch.ledger) - shown} more")
    return ", ".join(words)


def notice(batch: Batch) -> str:
    """One line saying what an outside batch recorded, and how to take it back."""
    doc = batch.calls[0] if batch.calls else {}
    if batch.session != OUTSIDE:
        by = doc.get("left_running", {})
        return (
            f"changed by what batch {by.get('batch')} left running: {what_changed(batch)}; "
            f"recorded as batch {batch.seq} of session {batch.session} "
            f"('earshot undo --session {batch.session}' takes it back)"
        )
    ended = doc.get("ended")
    also = (
        f" (batch {ended['batch']} had left a command running that has ended since)"
        if isinstance(ended, dict)
        else ""
    )
    return (
        f"changed outside any call: {what_changed(batch)}{also}; recorded as batch "
        f"{batch.seq} of '{OUTSIDE}' ('earshot undo --session {OUTSIDE}' takes it back)"
    )
