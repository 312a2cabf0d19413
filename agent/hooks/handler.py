"""Hook events onto earshot: one session per agent session, one batch per model response.

- SessionStart binds the agent's session to an earshot session (a resumed
  agent session finds the same one) and closes what a previous run of it
  left open.
- A prompt closes the open batch, then becomes a prompt entry of the
  session's log, so ``earshot tree`` and ``rewind N --code`` work per prompt.
- Before a tool that may change files (anything but the agent's read-only
  tools), the state before it is recorded, opening the batch at the first
  such call of a response (``earshot.agent.core.external``); after it, what
  it changed is its ledger. A subagent dispatch stays one unit with the
  calls its subagents make.
- The end of a model response closes the batch; the end of a turn or of the
  session closes anything left, a call whose end never came included (what
  it did is recorded as its own, never the next call's).

Failing open, never silently: when the state before a call cannot be
recorded, the call still runs (unless ``strict``: then it is refused, with
a reason the model sees) and the answer says so to the person; the batch
lists the call as a gap, which ``earshot log`` shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from earshot.agent.core import coverage
from earshot.agent.core.batch import Batch
from earshot.agent.core.calls import Bash, error_text
from earshot.agent.core.conversation import new_session, note_compaction, say, select
from earshot.agent.core.engine import Engine
from earshot.agent.core.external import session_lock
from earshot.agent.core.external_calls import ExternalCall, ToolKind
from earshot.agent.core.external_notes import recently_closed
from earshot.agent.core.external_open import begin_call, open_batch, record_gap
from earshot.agent.core.outside import notice
from earshot.agent.core.records import get_bound_session, put_bound_session
from earshot.agent.core.tracker import ChangeTracker
from earshot.agent.hooks.answer import SILENT, Answer
from earshot.agent.hooks.events import EventKind, HookEvent
from earshot.cas import faults
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.project import Project

log = get_logger("earshot.agent.hooks")


@dataclass(frozen=True, slots=True)
class Options:
    """How the hook was installed, and who runs it."""

    #: Refuse a tool whose state before could not be recorded.
    strict: bool = False
    #: The agent's process (pid, start time): an open batch lives while it does.
    holder: tuple[int, int | None] | None = None


def needs_nothing(event: HookEvent) -> bool:
    """Whether the event costs nothing at all: a read-only tool's, or one earshot ignores."""
    if event.kind is EventKind.OTHER:
        return True
    call = event.call
    return call is not None and call.kind is ToolKind.READ


@contextlib.contextmanager
def _bind_lock(project: Project) -> Iterator[None]:
    """Two first events of one agent session must not make two earshot sessions."""
    directory = project.store_dir / "external"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / "bind.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def bind(project: Project, agent: str, agent_session: str) -> tuple[str, bool]:
    """The earshot session of an agent's session, made on its first event; and
    whether it is new."""
    with project.store.backend.read() as view:
        bound = get_bound_session(view, agent, agent_session)
    if bound is not None:
        return select(project, bound)[0].id, False
    with _bind_lock(project):
        with project.store.backend.read() as view:
            bound = get_bound_session(view, agent, agent_session)
        if bound is not None:
            return select(project, bound)[0].id, False
        record = new_session(project)
        with project.store.backend.write() as txn:
            put_bound_session(txn, agent, agent_session, record.id)
        log.info("bound", agent=agent, agent_session=agent_session, session=record.id)
        return record.id, True


def _destructive(engine: Engine, call: ExternalCall) -> Callable[[], bool]:
    """Whether the call may destroy data, asked only when the answer matters:
    a command as the shell heuristic judges it; a tool earshot does not know
    may do anything; a write changes only what it names."""
    if call.kind is ToolKind.SHELL and call.command is not None:
        return engine.tools.judge(Bash(call.command))
    return lambda: call.kind is not ToolKind.WRITE


_GAP = "its state before was not recorded ({}); undo cannot take it back"


def handle(
    project: Project,
    event: HookEvent,
    *,
    tracker: ChangeTracker | None,
    options: Options,
) -> Answer:
    """Do what ``event`` means to earshot (the module's rules); never raises for
    what a store or a tree can do wrong: the answer says what went wrong."""
    if needs_nothing(event):
        return SILENT
    try:
        session, _new = bind(project, event.agent, event.session)
        engine = Engine(project, session, tracker=tracker)
    except (EarshotError, OSError) as exc:
        return _failed(event, exc, options)
    with session_lock(engine):
        try:
            faults.point("hook-event")
            return _handle(engine, event, options)
        except (EarshotError, OSError) as exc:
            return _failed(event, exc, options)


def _failed(event: HookEvent, exc: BaseException, options: Options) -> Answer:
    log.warning("hook_failed", hook_event=event.name, error=error_text(exc))
    return failure(event, error_text(exc), options.strict)


def failure(event: HookEvent, reason: str, strict: bool) -> Answer:
    """The answer to an event earshot could not handle: the tool runs unrecorded
    (said to the person), or with ``strict`` it is refused (said to the model)."""
    call = event.call
    if event.kind is EventKind.PRE_TOOL and call is not None:
        if strict:
            return Answer(
                deny=f"earshot could not record the state before this {call.tool} call "
                f"({reason}), and it is installed with --strict, so the call was not run"
            )
        return Answer(message=f"earshot: {call.tool} runs unrecorded: {_GAP.format(reason)}")
    what = f"{call.tool} " if call is not None else ""
    return Answer(message=f"earshot: could not record {what}at {event.name}: {reason}")


def _handle(engine: Engine, event: HookEvent, options: Options) -> Answer:
    kind = event.kind
    if kind is EventKind.PRE_TOOL:
        assert event.call is not None
        begun, _index = begin_call(
            engine,
            event.call,
            holder=options.holder,
            agent=event.agent,
            destructive=_destructive(engine, event.call),
            agent_session=event.session,
        )
        begun.done()
        return _outside_said(engine)
    if kind is EventKind.POST_TOOL:
        return _after_tool(engine, event, options)
    if kind in (EventKind.SUBAGENT_START, EventKind.SUBAGENT_STOP):
        batch = open_batch(engine)
        if batch is not None:
            try:
                if event.subagent is not None:
                    batch.subagent(event.subagent, kind is EventKind.SUBAGENT_START)
            finally:
                batch.done()
        return SILENT
    # The end of a response or of a turn closes the batch, unless a subagent
    # dispatch still runs in it; a prompt or the session's end, whatever runs.
    waits = kind in (EventKind.RESPONSE_END, EventKind.TURN_END)
    closed = _close_open(engine, _REASONS[kind], unless_dispatching=waits)
    project, session = engine.project, engine.session.id
    if kind is EventKind.PROMPT:
        say(project, session, "user", event.text or "")
    elif kind is EventKind.TURN_END and event.text:
        say(project, session, "assistant", event.text)
    elif kind is EventKind.COMPACT:
        note_compaction(
            project, session, f"{event.agent} compacted its context ({event.detail or '?'})"
        )
    # What the batch did that undo cannot take back, said in the agent's view.
    uncovered = coverage.uncovered(closed.ledger) if closed is not None else []
    if uncovered:
        return Answer(message="\n".join(f"earshot: {line}" for line in coverage.lines(uncovered)))
    return SILENT


def _outside_said(engine: Engine) -> Answer:
    """What changed outside any call before this one, said in the agent's view."""
    recorded = engine.outside.recorded
    if not recorded:
        return SILENT
    return Answer(message="\n".join(f"earshot: {notice(b)}" for b in recorded))


_REASONS = {
    EventKind.COMMAND: "earshot was asked from the prompt",
    EventKind.RESPONSE_END: "the model's response ended",
    EventKind.SESSION_START: "the agent's session started again",
    EventKind.PROMPT: "a new prompt",
    EventKind.TURN_END: "the turn ended",
    EventKind.SESSION_END: "the agent's session ended",
    EventKind.COMPACT: "the agent compacted its context",
}


def _close_open(engine: Engine, why: str, *, unless_dispatching: bool = False) -> Batch | None:
    """Commit the session's open batch, if any, and return it; ``unless_dispatching``:
    not while a subagent dispatch runs (a subagent's response ends inside the
    dispatch's unit)."""
    batch = open_batch(engine)
    if batch is None:
        return None
    try:
        if not (unless_dispatching and batch.dispatching):
            return batch.close(why)
    finally:
        batch.done()
    return None


def said_of(event: HookEvent) -> dict[str, Any]:
    """What the agent said of a call's end, as its batch keeps it: an error, an interrupt."""
    said: dict[str, Any] = {}
    if event.error:
        said["error"] = event.error[:2000]
    if event.interrupted:
        said["interrupted"] = True
    return said


def _after_tool(engine: Engine, event: HookEvent, options: Options) -> Answer:
    call = event.call
    assert call is not None
    batch = open_batch(engine)
    index = batch.call_for(call.key) if batch is not None else None
    if batch is None or index is None:
        if batch is not None:
            batch.done()
        if call.key in recently_closed(engine.project.store_dir, engine.session.id):
            return SILENT  # its end came after its batch closed, which recorded it
        why = "its start was never seen: the hook before it did not run or failed"
        gap = record_gap(
            engine, call, why, holder=options.holder, agent=event.agent, agent_session=event.session
        )
        gap.done()
        return Answer(message=f"earshot: {call.tool} ran unrecorded: {_GAP.format(why)}")
    try:
        batch.end(index, call, destructive=_destructive(engine, call), said=said_of(event))
    finally:
        batch.done()
    return SILENT
