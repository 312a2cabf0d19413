"""Sessions on the checkpoint side: creating, choosing, and retention.

A session's id (time-ordered, ``earshot.agent.log.ids``) names both its
conversation log and its checkpoint history; choosing one for a command, with
both halves in place, is ``conversation.select``. The store keeps the batches of
the most recently touched sessions (20 by default); older sessions' batches
and ledgers are pruned when a session starts and by ``earshot gc``. The
conversation logs are never pruned by this.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from earshot.agent.core.records import (
    OUTSIDE,
    SessionRecord,
    all_sessions,
    delete_batch,
    delete_session,
    get_session,
    load_settled,
    put_session,
    session_batches,
)
from earshot.agent.log.ids import new_session_id
from earshot.cas.digest import Digest
from earshot.cas.gc import GcReport
from earshot.cas.lmdb_backend import StoreBusy
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project

DEFAULT_KEEP_SESSIONS = 20
ENV_SESSION = "EARSHOT_SESSION"


def create_session(
    project: Project, session_id: str | None = None, next_seq: int = 1
) -> SessionRecord:
    """A new session (or register a given id, e.g. one made by the session log).

    ``next_seq``: the first batch number, above any batch the session's log
    already links (a session whose checkpoint history was pruned).
    """
    now = time.time_ns()
    record = SessionRecord(session_id or new_session_id(), now, now, next_seq)
    with project.store.backend.write() as txn:
        existing = get_session(txn, record.id)
        if existing is not None:
            return existing
        put_session(txn, record)
    return record


def list_sessions(project: Project) -> list[SessionRecord]:
    """Sessions of this root, most recently touched first."""
    with project.store.backend.read() as view:
        records = all_sessions(view)
    return sorted(records, key=lambda r: r.touched_ns, reverse=True)


def start_session_upkeep(project: Project) -> None:
    """Retention at session start: prune old sessions, and collect if that freed any.

    Skipped quietly when another process has the store open (gc needs it alone);
    the next start or an explicit 'earshot gc' catches up.
    """
    if prune_sessions(project):
        with contextlib.suppress(StoreBusy):
            collect_kept(project)


def busy_sessions(project: Project) -> set[str]:
    """Sessions with an operation not ended (an agent's open batch, an
    interrupted batch waiting to be recorded): never removed or pruned."""
    return {str(i.doc.get("session")) for i in project.intents.pending()}


def prune_sessions(project: Project, keep: int = DEFAULT_KEEP_SESSIONS) -> list[str]:
    """Drop the checkpoint history of all but the ``keep`` most recent sessions.

    A session with an operation not ended (an agent's open batch, an
    interrupted batch waiting to be recorded) is kept, however old.
    """
    busy = busy_sessions(project)
    every = list_sessions(project)
    old = [r for r in every[keep:] if r.id not in busy]
    if not old:
        return []
    dropped = {r.id for r in old}
    oldest_kept = min((r.created_ns for r in every if r.id not in dropped), default=time.time_ns())
    with project.store.backend.write() as txn:
        for record in old:
            delete_session(txn, record.id)
        prune_outside(txn, oldest_kept)
    return [r.id for r in old]


def prune_outside(txn: Any, before_ns: int) -> int:
    """Drop the batches of what changed outside any call recorded before
    ``before_ns`` (older than every kept session: no kept session's log lists
    them), as the sessions of their time were dropped.

    The newest is always kept (``undo --session outside`` takes it back), and
    so is every batch a kept one names (an undo's target, a redo's undo): the
    dropped ones are a prefix of the sequence below all of those.
    """
    batches = session_batches(txn, OUTSIDE, ledgers=False)
    old = [b.seq for b in batches[:-1] if b.time_ns < before_ns]
    if not old:
        return 0
    cut = max(old)
    while True:  # a batch kept because it is named may name another
        named = [t - 1 for b in batches if b.seq > cut for t in b.targets]
        lower = min([cut, *named])
        if lower == cut:
            break
        cut = lower
    gone = [b.seq for b in batches if b.seq <= cut]
    for seq in gone:
        delete_batch(txn, OUTSIDE, seq)
    return len(gone)


def batch_roots(project: Project) -> list[Digest]:
    """Every snapshot a kept batch refers to (what changed outside any call
    included), and the settled state the next batch compares with: gc must
    keep them."""
    roots: list[Digest] = []
    with project.store.backend.read() as view:
        for record in all_sessions(view, outside=True):
            for batch in session_batches(view, record.id):
                roots.extend(d for d in (batch.before, batch.after) if d is not None)
        settled = load_settled(view)
    if settled is not None:
        roots.append(settled.snapshot)
    return roots


def ledger_blobs(project: Project) -> set[Digest]:
    """Every content a kept batch's ledger names, before and after: undo brings the
    before back. Most are in the batch's snapshots; a state another session's
    batch held only between two of its calls is in none, and gc must keep it
    too."""
    blobs: set[Digest] = set()
    with project.store.backend.read() as view:
        for record in all_sessions(view, outside=True):
            for batch in session_batches(view, record.id):
                for line in batch.ledger:
                    for state in (line.before, line.after):
                        if state is not None and state.digest is not None:
                            blobs.add(state.digest)
    return blobs


def intent_roots(project: Project) -> list[Digest]:
    """Every snapshot an operation not ended yet refers to: the state it began
    from, and each state an agent's open batch noted (``external``'s "state"
    notes), whether its owner runs or is gone and it waits to be finished."""
    roots: list[Digest] = []
    for intent in project.intents.pending():
        texts = [intent.doc.get("before")]
        for note in project.intents.notes(intent):
            state = note.get("state")
            if isinstance(state, dict):
                texts.append(state.get("snap"))
        for text in texts:
            try:
                roots.append(Digest(bytes.fromhex(str(text))))
            except ValueError:
                continue  # None, or not a digest: nothing to keep
    return roots


def kept_roots(project: Project) -> list[Digest]:
    """What gc keeps beside the listed snapshots."""
    return batch_roots(project) + intent_roots(project)


def collect(
    project: Project,
    keep_sessions: int = DEFAULT_KEEP_SESSIONS,
    compact: bool = False,
    progress: Progress = QUIET,
) -> GcReport:
    """Retention, then gc: prune old sessions' batches, keep every snapshot still named."""
    prune_sessions(project, keep_sessions)
    return collect_kept(project, compact=compact, progress=progress)


def collect_kept(project: Project, compact: bool = False, progress: Progress = QUIET) -> GcReport:
    """gc keeping what the kept sessions, batches and open operations need."""
    return project.gc(
        extra_roots=lambda: kept_roots(project),
        compact=compact,
        progress=progress,
        extra_blobs=lambda: ledger_blobs(project),
    )
