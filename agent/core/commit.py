"""A batch's two durable moments: its intent, and its one commit point.

``begin_intent`` reserves the batch's number and commits an intent naming
the state before it, before any file changes: whatever then happens to the
process, the next command finds the intent and records (or finishes) the
batch from it. ``commit_batch`` is the commit point. In one transaction:
the batch record (under the number its intent reserved), the session's
state, the watch mark, the marks the batch sets on other batches
(``undone_by``/``redone_by``), the end of its intent, and the start of a
follow-up intent. Nothing a reader needs is written after it, so a process
killed at any instant leaves either the intent (and the next command
records the batch from it) or the whole batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, Change, State
from earshot.agent.core.ledger import mark_ambiguous, merge_ledger
from earshot.agent.core.moves import known_before, moves_in
from earshot.agent.core.records import (
    SessionRecord,
    Settled,
    WatchMark,
    get_batch,
    get_session,
    note_batch_span,
    put_batch,
    put_session,
    put_settled,
    put_watch_mark,
)
from earshot.cas import faults
from earshot.cas.digest import Digest
from earshot.cas.intents import Held, end_intent, put_intent
from earshot.cas.project import Project

#: The state a batch ended on, known exactly, and the process groups its
#: commands left running, with their command (``Settled``).
Settles = tuple[Digest, tuple[tuple[int, str], ...]]
#: ``marks(seq)`` -> {other batch's seq: the fields to set on it}, given the
#: committing batch's own number.
Marks = Callable[[int], Mapping[int, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Draft:
    """A batch before its commit gives it a number and a time."""

    kind: BatchKind
    calls: tuple[dict[str, Any], ...]
    #: The snapshot before the batch, and after it (None: nothing recorded).
    before: Digest | None
    after: Digest | None
    ledger: Sequence[Change]
    folded: bool = False
    #: For undo/redo/rewind: the batches reverted or replayed.
    targets: tuple[int, ...] = ()
    #: Recorded by a later command: its process died (see ``recovery``).
    interrupted: bool = False


def begin_intent(
    project: Project,
    session: SessionRecord,
    kind: str,
    *,
    before: Digest | None,
    anchor: str | None,
    doc: Mapping[str, Any],
    holder: tuple[int, int | None] | None = None,
) -> Held:
    """Reserve the session's next batch number and commit an intent for it, in one
    transaction. ``anchor``: the conversation's leaf, where the batch hangs;
    ``holder``: a process whose life keeps the intent live (``Intents.new``)."""
    fields: dict[str, Any] = {
        "session": session.id,
        "before": before.hex() if before is not None else None,
        "anchor": anchor,
        **doc,
    }
    held = project.intents.new(kind, fields, holder)
    try:
        with project.store.backend.write() as txn:
            current = get_session(txn, session.id) or session
            held.intent = replace(held.intent, doc={**fields, "seq": current.next_seq})
            put_session(txn, replace(current, next_seq=current.next_seq + 1))
            put_intent(txn, held.intent)
    except BaseException:
        held.release()
        raise
    faults.point("intent-begun")
    return held


def others_running(project: Project, session: str, held: Held | None) -> bool:
    """Whether a batch of another session is running on this root right now."""
    intents = project.intents
    return any(
        i.doc.get("session") not in (None, session)
        and (held is None or i.id != held.id)
        and intents.is_live(i)
        for i in intents.pending()
    )


def _finished(
    ledger: list[Change], moved: dict[str, str], known: dict[str, State]
) -> tuple[Change, ...]:
    """The merged ledger with what the batch moved, and the content before of what
    was not held but is known now (``known_before``): a path unchanged by the
    batch, only newly held, is no change at all."""
    out = []
    for line in ledger:
        if line.path in moved:
            line = replace(line, moved=moved[line.path])
        if line.path in known:
            line = replace(line, before=known[line.path])
        if line.before != line.after:
            out.append(line)
    return tuple(out)


def commit_batch(
    project: Project,
    draft: Draft,
    *,
    session: SessionRecord,
    held: Held | None,
    started_ns: int,
    overlap: bool,
    watch_mark: WatchMark | None,
    marks: Marks | None = None,
    then: Held | None = None,
    settles: Settles | None = None,
    between: bool = False,
) -> tuple[Batch, SessionRecord]:
    """Commit ``draft``; returns the batch and the session's state after it.

    ``session``: the session as this process knows it (the paths it wrote
    are merged with what the store holds). ``overlap``: another session's
    batch was seen running meanwhile; the store's record of recent batches
    may show more. ``watch_mark``: what the belief the batch ends on vouches
    for (None drops the mark). ``then``: an intent for what must follow,
    made by the caller, started in the same transaction. ``settles``: the
    state the batch ended on, known exactly, and the process groups its
    commands left running (None: not known; ``Settled``). ``between``: a batch
    of changes made between calls (``outside``): it spans no time of its own
    beside other sessions' batches, and leaves the watch mark as it is.
    """
    now = time.time_ns()
    # What the batch moved of what is not held, and what it left held of it
    # unwritten (outside the transaction: both look at the disk).
    moved: dict[str, str] = {}
    known: dict[str, State] = {}
    if draft.kind is BatchKind.CALLS:
        moved = moves_in(project.root, draft.ledger)
        known = known_before(project.root, merge_ledger(draft.ledger), moved, started_ns)
    faults.point("batch-commit")
    with project.store.backend.write() as txn:
        beside = (not between and note_batch_span(txn, session.id, started_ns, now)) or overlap
        ledger = list(draft.ledger)
        if beside and draft.kind is BatchKind.CALLS:
            ledger = mark_ambiguous(ledger, draft.calls)
        current = get_session(txn, session.id) or session
        seq = int(held.intent.doc["seq"]) if held is not None else current.next_seq
        anchor = held.intent.doc.get("anchor") if held is not None else None
        batch = Batch(
            session=session.id,
            seq=seq,
            kind=draft.kind,
            time_ns=now,
            calls=draft.calls,
            before=draft.before,
            after=draft.after,
            ledger=_finished(merge_ledger(ledger), moved, known),
            folded=draft.folded,
            targets=draft.targets,
            interrupted=draft.interrupted,
            anchor=anchor if isinstance(anchor, str) else None,
        )
        put_batch(txn, batch)
        for other, fields in (marks(seq) if marks is not None else {}).items():
            marked = get_batch(txn, session.id, other)
            if marked is not None:
                put_batch(txn, replace(marked, **fields))
        if not between:
            put_watch_mark(txn, watch_mark)
        # A batch beside another session's may have missed what that one changed
        # after this one's last restage: the tree it ends on is not known to be
        # the disk's, and the next batch must not take the difference for the
        # person's (outside any call).
        if settles is None or beside:
            put_settled(txn, None)
        else:
            put_settled(txn, Settled(settles[0], session.id, seq, settles[1]))
        written = tuple(dict.fromkeys((*current.written, *session.written)))
        state = SessionRecord(
            current.id, current.created_ns, now, max(current.next_seq, seq + 1), written
        )
        put_session(txn, state)
        if held is not None:
            end_intent(txn, held.intent)
        if then is not None:
            put_intent(txn, then.intent)
    return batch, state
