"""Recording a batch whose progress is not fully known: from its state before to now.

A batch whose process died (``recovery``), or an agent's batch some of whose
notes could not be written (a full disk: ``Held.incomplete``), is recorded
the same way: the tree is walked now, and the batch spans from the state
recorded before its first call to that. A change is pinned on a call only
where the notes prove it:

- a write whose content the path still holds (its path and digest noted);
- an earshot command whose tree, noted when it ended, already held the
  path's state (calls run back to back in one process);
- for an agent's calls (its hooks' notes), a span that made the change:
  the path held something else at the span's start and its state now at
  its end. A tree noted at a call's end also holds what the person did
  between calls, so it proves nothing alone.

Anything else is "restage": undo restores what the batch modified or
deleted, but never deletes what it cannot prove a call created (the person
may have worked on after the kill).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from earshot.agent.core.batch import BY_RESTAGE, Batch, BatchKind, Change, State
from earshot.agent.core.commit import Draft
from earshot.agent.core.engine import Engine
from earshot.agent.core.external_notes import Notes, Span
from earshot.agent.core.ledger import tree_changes
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held
from earshot.cas.lookup import lookup
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project


def _state(project: Project, tree: Digest, path: str) -> State | bool | None:
    """What ``tree`` holds at ``path``; False when the tree is gone (no proof from it)."""
    try:
        with project.store.reader() as reader:
            return State.of(lookup(reader, tree, path))
    except EarshotError:
        return False  # that tree is gone (a gc on a full disk)


class Proofs:
    """What an interrupted batch's notes prove about who made which change."""

    def __init__(self, notes: list[dict[str, Any]], external: bool) -> None:
        #: path -> (call, content digest) a write noted.
        self.wrote: dict[str, tuple[int, str]] = {}
        #: (tree an earshot command left, its attribution).
        self.left: list[tuple[Digest, int | str]] = []
        read = Notes.read(notes) if external else None
        if read is not None and read.damaged is not None:
            self.spans: list[Span] = []
            return  # damaged notes prove nothing
        self.spans = read.spans if read is not None else []
        for note in notes:
            try:
                if "path" in note and "digest" in note and "call" in note:
                    self.wrote[str(note["path"])] = (int(note["call"]), str(note["digest"]))
                elif "tree" in note and not external:
                    tree = Digest(bytes.fromhex(str(note["tree"])))
                    self.left.append((tree, note.get("by", BY_RESTAGE)))
            except (ValueError, TypeError):
                continue  # a note that does not read proves nothing

    def who(self, project: Project, line: Change) -> int | str:
        after = line.after
        proof = self.wrote.get(line.path)
        digest = after.digest.hex() if after is not None and after.digest is not None else None
        if proof is not None and digest == proof[1]:
            return proof[0]
        for tree, by in self.left:
            if _state(project, tree, line.path) == after:
                return by
        for span in self.spans:
            owner = span.owner(line.path)
            if not isinstance(owner, int):
                continue
            end = _state(project, span.end, line.path)
            start = _state(project, span.start, line.path)
            if end == after and start is not False and start != after:
                return owner
        return BY_RESTAGE


def record_interrupted(
    project: Project,
    engine: Engine,
    held: Held,
    calls: list[dict[str, Any]],
    *,
    external: bool,
    progress: Progress = QUIET,
) -> Batch:
    """Walk the tree now and record the batch ``held`` names from its state before,
    flagged interrupted, each change pinned on a call only where the notes prove it."""
    doc = held.intent.doc
    notes = held.notes()
    before = Digest(bytes.fromhex(str(doc["before"]))) if doc.get("before") else None
    after = project.record(
        None,
        note="after an interrupted batch",
        session=engine.session.id,
        listed=False,
        progress=progress,
    )
    proofs = Proofs(notes, external)
    ledger: list[Change] = []
    if before is not None:
        old_tree = project.read_snapshot(before).tree
        for line in tree_changes(project, old_tree, after.snapshot.tree, by=BY_RESTAGE):
            ledger.append(replace(line, by=proofs.who(project, line)))
    engine.remember_written(proofs.wrote)
    draft = Draft(BatchKind.CALLS, tuple(calls), before, after.digest, ledger, interrupted=True)
    return engine.record(draft, held=held)
