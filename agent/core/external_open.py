"""A session's open batch of an agent's calls: finding it, opening one, closing an idle one.

Each hook event of a session runs under its lock (``external.session_lock``)
and takes the session's open batch up where the last event left it
(``open_batch``), or opens one at the first call that may change files
(``begin_call``; ``record_gap`` for a call seen only ending). An undo, redo
or rewind asked while the agent waits closes the open batch first
(``close_idle``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from earshot.agent.core.batch import Batch
from earshot.agent.core.engine import INTENT_CALLS, Engine
from earshot.agent.core.external import ExternalBatch, restage_before, session_lock
from earshot.agent.core.external_calls import ExternalCall, ToolKind
from earshot.agent.core.external_notes import EXTERNAL, Notes, point, pointer
from earshot.agent.core.policy import BatchState
from earshot.agent.core.vouched import MAX_LINKED
from earshot.cas.intents import Held, Intent


def _open_intent(engine: Engine) -> Intent | None:
    for intent in engine.project.intents.pending():
        doc = intent.doc
        ours = intent.kind == INTENT_CALLS and doc.get("session") == engine.session.id
        if ours and isinstance(doc.get(EXTERNAL), dict):
            return intent
    return None


def open_batch(engine: Engine) -> ExternalBatch | None:
    """The session's open batch, taken for this event; None when none is open."""
    intent = _open_intent(engine)
    if intent is None:
        return None
    held = engine.project.intents.take(intent)
    if held is None:
        return None  # it ended meanwhile
    batch = ExternalBatch.resumed(engine, held)
    named = intent.doc.get(EXTERNAL) or {}
    agent, agent_session = str(named.get("agent")), named.get("agent_session")
    if agent_session and not pointer(engine.project.store_dir, agent, agent_session).exists():
        # A close that did not commit (killed, a full disk) took its name away.
        _point(engine, agent, str(agent_session), held)
    return batch


def _open(
    engine: Engine,
    call: ExternalCall,
    *,
    holder: tuple[int, int | None] | None,
    agent: str,
    destructive: Callable[[], bool],
    agent_session: str | None = None,
) -> ExternalBatch:
    """Open a batch: record the state before ``call`` first (as the policy asks),
    then commit the intent that reserves the batch's number, with ``holder``
    (the agent's process) keeping it live between events."""
    policy = engine.policy
    policy.batch = BatchState(started_ns=time.time_ns(), stale=True)
    policy.last = None
    restage_before(engine, call, destructive)
    engine.note_outside(start=True)  # what changed since the last batch ended
    before = policy.last.digest if policy.last is not None else engine.project.head_snapshot()
    external = {"agent": agent, "agent_session": agent_session}
    held = engine.begin_intent(
        INTENT_CALLS, before, {"calls": [], EXTERNAL: external}, holder=holder
    )
    notes = Notes(snapshot=before, belief=policy.belief, overlap=policy.batch.overlap)
    batch = ExternalBatch(engine, held, notes)
    if agent_session is not None:
        _point(engine, agent, agent_session, held)
    return batch


def _point(engine: Engine, agent: str, agent_session: str, held: Held) -> None:
    """Name the open batch for the watch daemon, which cannot read the store: it
    may then tell a response's end with nothing open at once, and when its
    watcher vouches for the tree (``watched``), note the agent's calls itself."""
    linked = engine.project.linked_paths()
    watched = engine.policy.belief.watch_mark() is not None
    if linked is None or len(linked) > MAX_LINKED:
        watched, linked = False, []
    doc = {
        "session": engine.session.id,
        "intent": held.id,
        "root": engine.root,
        "watched": watched,
        "linked": linked,
    }
    point(engine.project.store_dir, agent, agent_session, doc)


def begin_call(
    engine: Engine,
    call: ExternalCall,
    *,
    holder: tuple[int, int | None] | None,
    agent: str,
    destructive: Callable[[], bool],
    agent_session: str | None = None,
) -> tuple[ExternalBatch, int]:
    """Note ``call`` begun in the session's open batch, opening one if none is.

    ``agent_session``: the agent's id for its session; a batch opened on a
    tree the watch daemon vouches for is named for the daemon by it.
    """
    batch = open_batch(engine)
    if batch is not None:
        return batch, batch.begin(call, destructive=destructive)
    batch = _open(
        engine,
        call,
        holder=holder,
        agent=agent,
        destructive=destructive,
        agent_session=agent_session,
    )
    return batch, batch._begun(call)


def record_gap(
    engine: Engine,
    call: ExternalCall,
    why: str,
    *,
    holder: tuple[int, int | None] | None,
    agent: str,
    agent_session: str | None = None,
) -> ExternalBatch:
    """Note that ``call`` ran with no state recorded before it, in the session's
    open batch, opening one (from the state now, which holds what it did) if none is."""
    batch = open_batch(engine)
    if batch is not None:
        batch.gap(call, why)
        return batch
    unknown = ExternalCall(call.tool, ToolKind.UNKNOWN, call.key)
    batch = _open(
        engine,
        unknown,
        holder=holder,
        agent=agent,
        destructive=lambda: True,
        agent_session=agent_session,
    )
    doc = {**call.describe(engine.root), "gap": why}
    batch.notes.calls.append(doc)
    batch._note(gap=doc)
    return batch


def close_idle(engine: Engine, why: str) -> Batch | None:
    """Commit the session's open batch if no call of it is running (the agent waits
    for the person): an undo asked for now must not wait for the response to end."""
    if _open_intent(engine) is None:
        return None  # nothing open: take no lock, create nothing (a dry run reads only)
    with session_lock(engine):
        batch = open_batch(engine)
        if batch is None:
            return None
        try:
            return None if batch.running else batch.close(why)
        finally:
            batch.done()
