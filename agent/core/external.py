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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from earshot.agent.core.batch import BY_RESTAGE, Batch, BatchKind, Change
from earshot.agent.core.commit import Draft, others_running
from earshot.agent.core.engine import INTENT_CALLS, Engine
from earshot.agent.core.external_notes import Notes, Span, digest, pointer
from earshot.agent.core.files import resolve
from earshot.agent.core.interrupted import record_interrupted
from earshot.agent.core.ledger import tree_changes
from earshot.agent.core.policy import BatchState
from earshot.agent.core.vouched import MAX_LINKED
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held, Intent
from earshot.cas.logs import get_logger
from earshot.cas.restage import relative_path

log = get_logger("earshot.agent")

#: What a batch of external calls keeps in its intent's doc.
EXTERNAL = "external"


class ToolKind(Enum):
    """How a tool the agent runs may change files, as far as earshot can tell."""

    #: Changes nothing: costs nothing.
    READ = "read"
    #: Writes only the files its input names (a Write, an Edit, a patch).
    WRITE = "write"
    #: A shell command: anything may change; judged destructive or not.
    SHELL = "shell"
    #: Starts subagents that run tools of their own: one unit with their calls.
    DISPATCH = "dispatch"
    #: A tool earshot does not know (an MCP server's): anything may change.
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ExternalCall:
    """A tool call the agent runs itself, as its hook describes it."""

    #: The agent's own name for the tool (``Bash``, ``Write``, ``apply_patch``...).
    tool: str
    kind: ToolKind
    #: The agent's id for the call (``tool_use_id``), or one made up from the payload.
    key: str
    command: str | None = None
    #: What a write-kind tool names, as the agent gave them (absolute or relative).
    paths: tuple[str, ...] = ()
    #: Which agent made the call when it is not the main one (``subagent a1b2``).
    agent: str | None = None
    #: A write whose whole content the input carries: (path as given, BLAKE3 of
    #: the content), by which a killed batch's recovery proves the call made it.
    content: tuple[str, str] | None = None
    #: A command the agent runs on in the background: its end is reported at once,
    #: and what it does after is not this call's (the log says so).
    background: bool = False

    def describe(self, root: str) -> dict[str, Any]:
        """The call as its batch records it (``tool`` ``bash`` for any shell command,
        so it reads as the CLI's own calls do)."""
        doc: dict[str, Any] = {"tool": "bash" if self.kind is ToolKind.SHELL else self.tool}
        if self.kind is ToolKind.SHELL:
            doc["agent_tool"] = self.tool
        if self.command is not None:
            doc["command"] = self.command
        rels = relative_targets(root, self.paths)
        if rels:
            doc["path"] = rels[0]
        if len(rels) > 1:
            doc["paths"] = rels
        doc["id"] = self.key
        if self.kind is ToolKind.DISPATCH:
            doc["dispatch"] = True
        if self.background:
            doc["background"] = True
        if self.agent is not None:
            doc["agent"] = self.agent
        return doc


def relative_targets(root: str, paths: tuple[str, ...]) -> list[str]:
    """The root-relative paths a write names: each as given, and where an in-root
    link leads (the file really written). Paths outside the root are not earshot's."""
    out: dict[str, None] = {}
    for path in paths:
        try:
            out[relative_path(root, path)] = None
            out[resolve(root, path)] = None
        except (EarshotError, OSError, ValueError):
            continue
    return list(out)


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
        _restage_before(self.engine, call, destructive)
        if running:
            self._span(start, running[0])
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

        The state is brought up to date (what the call did is taken into the
        state the next call starts from) and the batch says so: undo cannot
        take that call back.
        """
        self._catch_up("a call ended that was never seen beginning")
        self.engine.policy.after_command(destructive=lambda: True, signalled=False)
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
            doc = self.held.intent.doc
            batch = record_interrupted(project, self.engine, self.held, calls, external=True)
            unpoint(project.store_dir, doc)
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
        batch = self.engine.record(draft, held=self.held)
        unpoint(project.store_dir, doc)
        self._remember_keys()
        return batch

    def _remember_keys(self) -> None:
        """Keep the closed batch's call keys: an end the agent reports late is then
        known as recorded, not a gap (``recently_closed``)."""
        keys = sorted(self.notes.keys)
        path = _closed_file(self.engine)
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


def _restage_before(engine: Engine, call: ExternalCall, destructive: Callable[[], bool]) -> None:
    """The policy's restage before ``call``: a dispatch of subagents walks, as the
    engine's does; a write restages what it names; a command as judged."""
    policy = engine.policy
    if call.kind is ToolKind.DISPATCH:
        policy.batch.written_fresh = True
        policy.full("before a subagent dispatch")
        return
    writes = call.kind is ToolKind.WRITE
    targets = set(relative_targets(engine.root, call.paths)) if writes else set()
    policy.before_call(
        writes=writes, destructive=destructive, targets=targets, written=engine.session.written
    )


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
    return ExternalBatch.resumed(engine, held)


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
    _restage_before(engine, call, destructive)
    before = policy.last.digest if policy.last is not None else engine.project.head_snapshot()
    external = {"agent": agent, "agent_session": agent_session}
    held = engine.begin_intent(
        INTENT_CALLS, before, {"calls": [], EXTERNAL: external}, holder=holder
    )
    notes = Notes(snapshot=before, belief=policy.belief, overlap=policy.batch.overlap)
    if agent_session is not None:
        _point(engine, agent, agent_session, held)
    return ExternalBatch(engine, held, notes)


def _point(engine: Engine, agent: str, agent_session: str, held: Held) -> None:
    """Name the open batch for the watch daemon, which cannot read the store: it
    may then tell a response's end with nothing open at once, and when its
    watcher vouches for the tree (``watched``), note the agent's calls itself."""
    belief = engine.policy.belief
    linked = engine.project.linked_paths()
    watched = belief.watch_mark() is not None
    if linked is None or len(linked) > MAX_LINKED:
        watched, linked = False, []
    doc = {
        "session": engine.session.id,
        "intent": held.id,
        "root": engine.root,
        "watched": watched,
        "linked": linked,
    }
    path = pointer(engine.project.store_dir, agent, agent_session)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(doc))
    os.replace(temp, path)


def _closed_file(engine: Engine) -> Path:
    return engine.project.store_dir / "external" / f"{engine.session.id}.closed"


def recently_closed(engine: Engine) -> set[str]:
    """The agent's keys of the calls of the session's last committed batch."""
    try:
        keys = json.loads(_closed_file(engine).read_text())
    except (OSError, ValueError):
        return set()
    return {str(k) for k in keys} if isinstance(keys, list) else set()


def unpoint(store_dir: Path, doc: dict[str, Any]) -> None:
    """Take the daemon's pointer to a batch away: it has been committed (``doc``: its
    intent's fields)."""
    named = doc.get(EXTERNAL) or {}
    if named.get("agent_session"):
        path = pointer(store_dir, str(named["agent"]), str(named["agent_session"]))
        with contextlib.suppress(OSError):
            path.unlink()


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
