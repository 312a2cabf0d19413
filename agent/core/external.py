"""Batches whose calls another program runs: an agent's hooks bracket each call.

An agent such as Claude Code runs its own tools and tells earshot of each
call through hooks, each a short process of its own: one before the call,
one after it, one when the model's response is done. A batch spans those
processes:

- The first call that may change files opens it: the policy's restage before
  it (what the watch daemon saw, or a walk), then a ``calls`` intent that
  reserves its number and names the agent's process as its *holder*: the
  intent stays live between hook processes while the agent lives, and once
  the agent is gone the next command records the batch as interrupted
  (``recovery``).
- Every event notes in the intent's notes the state it restaged (snapshot,
  tree, the daemon's token) and the calls begun and ended; the next event
  takes the policy's belief up from there.
- What changed while a call ran is that call's: its end records it. A call
  whose end never comes (an interrupted tool) keeps what it did: the next
  event that restages (another call's start, the batch's close) first
  records what changed since, and pins it on the calls still running, never
  on the call about to start.
- What changed while no call ran (the person, between two calls) is taken
  into the state the next call starts from, as in the engine.
- The batch commits at its one commit point (``Engine.record``) when the
  agent says the model's response is done, or the turn or session ends.

Every event of one session runs under the session's hook lock, so the
notes are read and written by one process at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from earshot.agent.core.batch import BY_RESTAGE, Batch, BatchKind, Change
from earshot.agent.core.calls import Bash
from earshot.agent.core.commit import Draft, others_running
from earshot.agent.core.engine import Engine
from earshot.agent.core.external_calls import ExternalCall, ToolKind, relative_targets
from earshot.agent.core.external_notes import (
    Notes,
    Span,
    closed_file,
    digest,
    unpoint,
)
from earshot.agent.core.interrupted import record_interrupted
from earshot.agent.core.ledger import tree_changes
from earshot.agent.core.policy import BatchState
from earshot.cas import faults
from earshot.cas.digest import Digest
from earshot.cas.intents import Held
from earshot.cas.logs import get_logger

log = get_logger("earshot.agent")


# -- the lock every event of a session takes ---------------------------------------


@contextlib.contextmanager
def session_lock(engine: Engine) -> Iterator[None]:
    """One hook event of a session at a time (two tools that run at once, say)."""
    directory = engine.project.store_dir / "external"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / f"{engine.session.id}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- the batch ---------------------------------------------------------------------


class ExternalBatch:
    """The open batch of one session, taken for one hook event.

    Made by ``open_batch`` (the session's open batch, if any) or
    ``begin_call`` (which opens one); ``done`` gives it up until the next
    event, ``close`` commits it.
    """

    def __init__(self, engine: Engine, held: Held, notes: Notes) -> None:
        self.engine = engine
        self.held = held
        self.notes = notes

    @classmethod
    def resumed(cls, engine: Engine, held: Held) -> ExternalBatch:
        """The batch ``held`` names, with the policy where its last event left it."""
        notes = Notes.read(held.notes())
        if notes.damaged is not None:
            # Recorded at its close as an interrupted batch is: from its state
            # before to a walk, each change a call's only where proven.
            log.warning("external", damaged_notes=notes.damaged, intent=held.id)
            held.mark_incomplete()
        policy = engine.policy
        policy.belief = notes.belief
        written = [p for c in notes.calls if c.get("path") for p in c.get("paths") or [c["path"]]]
        # ``stale``: the agent (or the person, at a permission prompt) had the
        # tree since the last event; without a watcher the next command's
        # restage must not take what happened meanwhile for the command's.
        policy.batch = BatchState(
            started_ns=held.intent.started_ns,
            stale=True,
            written_fresh=bool(written),
            forced=set(written),
            overlap=notes.overlap,
        )
        engine.remember_written(written)
        batch = cls(engine, held, notes)
        batch._settle_pending()
        return batch

    @property
    def seq(self) -> int:
        return int(self.held.intent.doc["seq"])

    @property
    def running(self) -> list[int]:
        """The calls begun and not ended, in the order they began."""
        return list(self.notes.running)

    @property
    def dispatching(self) -> bool:
        """Whether a subagent dispatch runs: a dispatching call, or a subagent it started."""
        calls = self.notes.calls
        return bool(self.notes.subagents) or any(calls[i].get("dispatch") for i in self.running)

    def subagent(self, ident: str, running: bool) -> None:
        """Note that subagent ``ident`` began (or ended): the batch stays one unit
        with its calls until it ends, even when the call that started it has."""
        if running:
            self.notes.subagents.add(ident)
        else:
            self.notes.subagents.discard(ident)
        self._write(subagent=ident, running=running)

    def call_for(self, key: str) -> int | None:
        """The call the agent calls ``key``, if one began in this batch and has not ended
        (the first of several that share a key)."""
        return next((i for i in self.notes.keys.get(key, ()) if i in self.notes.running), None)

    def begin(self, call: ExternalCall, *, destructive: Callable[[], bool]) -> int:
        """Record the state before ``call`` (the policy's restage) and note it begun.

        Calls still running keep what they change meanwhile: what the catch-up
        recorded, and what the restage before this call found after it.
        """
        running = list(self.notes.running)
        self._catch_up("a call began while another ran")
        start = self.engine.policy.belief.tree
        restage_before(self.engine, call, destructive)
        if running:
            self._span(start, running[0])
        else:  # between two calls, none running: no call's change
            self.engine.note_outside(start=False)
        return self._begun(call)

    def _begun(self, call: ExternalCall) -> int:
        index = len(self.notes.calls)
        doc = call.describe(self.engine.root)
        self.notes.calls.append(doc)
        self.notes.keys.setdefault(call.key, []).append(index)
        self.notes.running.append(index)
        if call.kind is ToolKind.WRITE:
            written = (doc.get("paths") or [doc["path"]]) if "path" in doc else []
            self.engine.remember_written(written)
        self._note(call=index, begin=doc, key=call.key)
        return index

    def end(
        self,
        index: int,
        call: ExternalCall,
        *,
        destructive: Callable[[], bool],
        said: dict[str, Any] | None = None,
    ) -> None:
        """Record the state after call ``index`` and pin what changed on it.

        ``said``: what the agent said of the call's end (an error, an
        interrupt), kept with the call.
        """
        policy = self.engine.policy
        start = policy.belief.tree
        folded = False
        if call.kind is ToolKind.WRITE:
            targets = set(relative_targets(self.engine.root, call.paths))
            policy.batch.forced |= targets
            policy.after_writes(targets)
        else:
            signalled = bool(said and said.get("interrupted"))
            folded = not policy.after_command(destructive=destructive, signalled=signalled)
        if folded:
            self.notes.folded = True
        else:
            self._span(start, index)
        if index in self.notes.running:
            self.notes.running.remove(index)
        tree = policy.belief.tree
        by: int | str = index if policy.belief.exact else BY_RESTAGE
        self._note(
            call=index,
            end=said or {},
            tree=tree.hex() if tree is not None else None,
            by=by,
            folded=folded,
        )

    def gap(self, call: ExternalCall, why: str) -> None:
        """A call that ran with no state recorded before it: its changes are nobody's.

        The state is brought up to date and what changed since the last one
        the batch holds is kept as unattributed lines: undo restores what was
        changed or deleted, and never deletes what was made. The batch says so.
        """
        self._catch_up("a call ended that was never seen beginning")
        start = self.engine.policy.belief.tree
        self.engine.policy.after_command(destructive=lambda: True, signalled=False)
        # What changed since the state the batch holds is nobody's for sure,
        # yet held on both sides: unattributed lines, as an interrupted
        # batch keeps them, so undo restores what the call changed or deleted
        # (and deletes nothing it made: no call is known to have made it).
        self._span(start, BY_RESTAGE)
        doc = {**call.describe(self.engine.root), "gap": why}
        self.notes.calls.append(doc)
        self._note(gap=doc)

    def done(self) -> None:
        """This event is done with the batch: it stays open for the next one."""
        self.held.close()

    def close(self, why: str) -> Batch:
        """Commit the batch; calls still running are recorded as ended now, with ``why``.

        A batch some of whose notes were lost (a full disk) is recorded as an
        interrupted one is: from its state before to a walk of the tree now.
        """
        project = self.engine.project
        if self.held.incomplete:
            calls = [
                {**c, "unfinished": why} if i in self.notes.running else c
                for i, c in enumerate(self.notes.calls)
            ]
            unpoint(project.store_dir, self.held.intent.doc)
            batch = record_interrupted(project, self.engine, self.held, calls, external=True)
            self._remember_keys()
            return batch
        self._catch_up(why)
        for index in self.notes.running:
            self.notes.calls[index] = {**self.notes.calls[index], "unfinished": why}
        self.notes.running.clear()
        ledger: list[Change] = []
        for span in self.notes.spans:
            for line in tree_changes(project, span.start, span.end, by=span.by):
                owner = span.owner(line.path)
                if owner is not None:  # None: between calls, nobody's
                    ambiguous = line.path in span.ambiguous
                    ledger.append(replace(line, by=owner, ambiguous=ambiguous))
        doc = self.held.intent.doc
        before = digest(doc["before"]) if doc.get("before") else None
        draft = Draft(
            BatchKind.CALLS,
            tuple(self.notes.calls),
            before,
            self.notes.snapshot if before is not None else None,
            ledger,
            folded=self.notes.folded,
        )
        self.engine.policy.batch.overlap |= self.notes.overlap
        # The daemon's name for the batch goes first: named, a committed batch
        # would take the notes of calls no one records (a kill between the
        # commit and the notes' removal). Unnamed and not committed (a kill, an
        # error), the next event takes it up in a worker and names it again.
        unpoint(project.store_dir, doc)
        batch = self.engine.record(draft, held=self.held)
        self._remember_keys()
        return batch

    def _remember_keys(self) -> None:
        """Keep the closed batch's call keys: an end the agent reports late is then
        known as recorded, not a gap (``recently_closed``)."""
        keys = sorted(self.notes.keys)
        path = closed_file(self.engine.project.store_dir, self.engine.session.id)
        with contextlib.suppress(OSError):
            temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            temp.write_text(json.dumps(keys))
            os.replace(temp, path)

    # -- the notes -----------------------------------------------------------------

    def _write(self, **fields: Any) -> None:
        """Append a note: the batch's progress lives in its notes, so one that cannot be
        written is an error (the store's space reserve given back once, on a full
        disk), and marks the batch incomplete: it is then recorded as interrupted."""
        self.held.note_or_raise(self.engine.project.store.backend.use_reserve, **fields)

    def _note(self, **fields: Any) -> None:
        """Note ``fields``, with the state the policy believes in now."""
        policy = self.engine.policy
        if policy.last is not None and policy.last.snapshot.tree == policy.belief.tree:
            self.notes.snapshot = policy.last.digest
        self.notes.belief = belief = policy.belief
        if self.notes.snapshot is not None and belief.tree is not None:
            fields["state"] = {
                "snap": self.notes.snapshot.hex(),
                "tree": belief.tree.hex(),
                "token": belief.token if isinstance(belief.token, str) else None,
                "exact": belief.exact,
            }
        self._write(**fields)
        if not self.notes.overlap and others_running(
            self.engine.project, self.engine.session.id, self.held
        ):
            self.notes.overlap = True
            self._write(overlap=True)

    def _span(self, start: Digest | None, by: int | str) -> None:
        """What changed from ``start`` to the believed tree is ``by``'s."""
        belief = self.engine.policy.belief
        end = belief.tree
        if start is None or end is None or start == end:
            return
        if not belief.exact:
            by = BY_RESTAGE
        self.notes.spans.append(Span(start, end, by))
        self._write(span=[start.hex(), end.hex()], by=by)

    def _settle_pending(self) -> None:
        """Restage at once what the watch daemon noted since the last restage, and
        pin each path on the call whose range saw it (``external_notes``)."""
        pending = self.notes.pending
        paths = pending.paths()
        if not pending.ranges:
            return
        policy = self.engine.policy
        start = policy.belief.tree
        if paths:
            policy.batch.forced |= pending.forced
            policy.scoped(paths, "what the watcher saw during the agent's calls")
        end = policy.belief.tree
        owners, ambiguous = pending.owners()
        fields: dict[str, Any] = {"settled": True}
        if start is not None and end is not None and start != end:
            span = Span(start, end, BY_RESTAGE, owners, frozenset(ambiguous))
            self.notes.spans.append(span)
            fields |= {"span": [start.hex(), end.hex()], "owners": owners}
            fields["ambiguous"] = sorted(ambiguous)
        self.notes.pending = type(pending)()
        self._note(**fields)

    def _catch_up(self, why: str) -> None:
        """Record what the calls still running changed so far, and pin it on them."""
        if not self.notes.running:
            return
        start = self.engine.policy.belief.tree
        self.engine.policy.after_command(destructive=lambda: True, signalled=False)
        self._span(start, self.notes.running[0])
        log.debug("external", catch_up=why, running=self.notes.running)


def _in_its_own_process() -> bool:
    return False


#: Whether the process the agent waits on for this event is gone. In its own
#: process a hook dies when the agent kills it; a daemon's worker lives on
#: after its client, and sets this (``cli/daemon.py``).
caller_gone: Callable[[], bool] = _in_its_own_process


def restage_before(engine: Engine, call: ExternalCall, destructive: Callable[[], bool]) -> None:
    """The policy's restage before ``call``: a dispatch of subagents walks, as the
    engine's does; a write restages what it names; a command as judged.

    Then, if the agent no longer waits (it killed the hook at its timeout and
    runs the tool now), what the restage read may hold part of what the tool
    did: the process dies as the hook would have in its own, with nothing of
    the event recorded. The next event finds the call never begun and keeps
    its changes as lines of no call, which undo restores.
    """
    faults.point("hook-restage")
    _restage_before(engine, call, destructive)
    if caller_gone():
        os.kill(os.getpid(), signal.SIGKILL)


def _restage_before(engine: Engine, call: ExternalCall, destructive: Callable[[], bool]) -> None:
    policy = engine.policy
    if call.kind is ToolKind.DISPATCH:
        policy.batch.written_fresh = True
        policy.previous = policy.found = None  # compared with nothing (``outside``)
        policy.full("before a subagent dispatch")
        return
    writes = call.kind is ToolKind.WRITE
    targets = set(relative_targets(engine.root, call.paths)) if writes else set()
    doomed = (
        engine.tools.doomed(Bash(call.command))
        if call.kind is ToolKind.SHELL and call.command is not None
        else None
    )
    policy.before_call(
        writes=writes,
        destructive=destructive,
        targets=targets,
        written=engine.session.written,
        doomed=doomed,
    )
