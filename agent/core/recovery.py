"""Finishing what a dead process started: the intents it left.

Every mutating operation commits an intent before it changes anything, and
ends it in the transaction that records its end (``earshot.cas.intents``).
An intent whose owner is gone (its lock is free) is finished by the next
command that changes files, and reported by any other command. The rules,
one per kind:

- ``calls`` (a batch of tool calls, earshot's or an agent's seen through its
  hooks, whose holder, the agent, is gone): stop what is left of its command's
  process group; remove its temp files; record the tree now (a full
  restage) as the state after, and the batch from the state before it
  (which was recorded before anything ran) to that, flagged *interrupted*.
  A change is attributed to a call only where the batch's notes prove it (a
  write_file whose content is what the path holds now); anything else is
  attributed to "restage", so undo restores what the batch modified or
  deleted but never deletes what it cannot prove a call created (the person
  may have worked on since the kill).
- ``undo``, ``redo``, ``rewind``: run the same revert again from the state
  the tree is in now; its batch spans from the state before the first
  attempt (``earshot.agent.core.undo.finish_revert``). A rewind then appends its
  navigation.
- ``navigate``: append the navigation a rewind with code had not appended.
- ``restore``: remove its temp files and restore again (``Project.finish_restore``).

What cannot be finished now (the store's disk is still full, say) stays,
is reported with the reason, and blocks undo and redo in its session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from earshot.agent.core.batch import BatchKind
from earshot.agent.core.command import stop_orphaned_group
from earshot.agent.core.engine import INTENT_CALLS, Engine
from earshot.agent.core.external_notes import EXTERNAL, recorded_calls, unpoint
from earshot.agent.core.interrupted import record_interrupted
from earshot.agent.core.navigation import NAVIGATE, finish_navigation
from earshot.agent.core.undo import finish_revert
from earshot.cas.apply import remove_temp_files
from earshot.cas.digest import short
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held, Intent
from earshot.cas.logs import get_logger
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.restage import relative_path

log = get_logger("earshot.agent.core.recovery")

_REVERTS = {k.value for k in (BatchKind.UNDO, BatchKind.REDO, BatchKind.REWIND)}


@dataclass(frozen=True, slots=True)
class Finished:
    """An interrupted operation this command finished."""

    intent: Intent
    #: One line for people.
    summary: str


@dataclass(frozen=True, slots=True)
class Unfinished:
    """An interrupted operation that could not be finished now, and why."""

    intent: Intent
    reason: str


def describe(intent: Intent) -> str:
    """What an intent stands for, in a few words."""
    doc = intent.doc
    when = time.strftime("%H:%M:%S", time.localtime(intent.started_ns / 1e9))
    session = str(doc.get("session", ""))[:12]
    if intent.kind == INTENT_CALLS and isinstance(doc.get(EXTERNAL), dict):
        agent = doc[EXTERNAL].get("agent", "an agent")
        return f"batch {doc.get('seq')} of session {session} ({agent}'s calls), started {when}"
    if intent.kind == INTENT_CALLS:
        calls = doc.get("calls") or []
        first = calls[0] if calls else {}
        what = first.get("command") or first.get("path") or first.get("tool") or "?"
        more = f" and {len(calls) - 1} more calls" if len(calls) > 1 else ""
        return f"batch {doc.get('seq')} of session {session} ({what}{more}), started {when}"
    if intent.kind in _REVERTS:
        targets = ", ".join(str(t) for t in doc.get("targets", []))
        return f"{intent.kind} of batches {targets} in session {session}, started {when}"
    if intent.kind == NAVIGATE:
        return f"the navigation of a rewind in session {session}, started {when}"
    if intent.kind == "restore":
        return f"restore to {str(doc.get('target', ''))[:12]}, started {when}"
    return f"an operation of kind {intent.kind!r}, started {when}"


def interrupted(project: Project) -> list[Intent]:
    """The intents whose owner is gone: what the next mutating command finishes."""
    intents = project.intents
    return [i for i in intents.pending() if not intents.is_live(i)]


def finish_all(
    project: Project, progress: Progress = QUIET
) -> tuple[list[Finished], list[Unfinished]]:
    """Finish every interrupted operation that can be finished now, oldest first
    (``progress`` hears how far each is)."""
    finished: list[Finished] = []
    unfinished: list[Unfinished] = []
    for intent in project.intents.pending():
        held = project.intents.claim(intent)
        if held is None:
            continue  # its owner lives, or another command finished it just now
        try:
            summary = _finish(project, held, progress)
        except (EarshotError, OSError) as exc:
            held.close()
            reason = str(exc) if isinstance(exc, EarshotError) else (exc.strerror or str(exc))
            log.warning("unfinished", intent=intent.id, kind=intent.kind, reason=reason)
            unfinished.append(Unfinished(intent, reason))
            continue
        except BaseException:
            held.close()
            raise
        log.info("finished", intent=intent.id, kind=intent.kind)
        finished.append(Finished(intent, summary))
    return finished, unfinished


def _finish(project: Project, held: Held, progress: Progress) -> str:
    kind = held.intent.kind
    if kind == INTENT_CALLS:
        return finish_batch(project, held, progress)
    if kind in _REVERTS:
        doc = held.intent.doc
        engine = Engine(project, str(doc["session"]))
        then_doc = doc.get("then")
        then = None
        if isinstance(then_doc, dict):
            then = project.intents.new(str(then_doc["kind"]), dict(then_doc["doc"]))
        try:
            impact = finish_revert(engine, held, then, progress)
        except BaseException:
            if then is not None:
                then.release()
            raise
        if then is not None:
            finish_navigation(project, then)
        return (
            f"finished an interrupted {kind}: restored {len(impact.restored):,}, deleted "
            f"{len(impact.deleted):,}, {len(impact.conflicts):,} conflicts "
            f"(batch {impact.record})"
        )
    if kind == NAVIGATE:
        finish_navigation(project, held)
        return "appended the navigation of an interrupted rewind"
    if kind == "restore":
        restored = project.finish_restore(held, progress)
        result = restored.result
        done = len(result.written) + len(result.deleted) if result is not None else 0
        target = str(held.intent.doc.get("target", ""))
        return (
            f"finished an interrupted restore to {target[:12]} ({done:,} paths written or deleted)"
        )
    raise UnknownIntent(held.intent)


class UnknownIntent(EarshotError):
    def __init__(self, intent: Intent) -> None:
        super().__init__(
            f"an interrupted operation of kind {intent.kind!r} that this earshot cannot finish "
            "(made by a newer version?)"
        )


def finish_batch(project: Project, held: Held, progress: Progress = QUIET) -> str:
    """Record a batch of tool calls whose process died (see the module's rules)."""
    doc = held.intent.doc
    notes = held.notes()
    for note in notes:
        if "pgid" in note:
            stop_orphaned_group(int(note["pgid"]), note.get("start"))
    calls = list(doc.get("calls") or [])
    if isinstance(doc.get(EXTERNAL), dict):  # an agent's calls, noted as its hooks saw them
        calls = recorded_calls(notes)
    dirs = set()
    for call in calls:
        try:
            rel = relative_path(str(project.root), str(call.get("path", "")))
        except (EarshotError, ValueError):
            continue
        dirs.add(rel.rpartition("/")[0])
    remove_temp_files(str(project.root), sorted(dirs), held.id)
    # A batch hangs in the conversation where it began (its anchor); only one
    # that knows no place is linked at the log's leaf now.
    engine = Engine(project, str(doc["session"]), link_conversation=not doc.get("anchor"))
    external = isinstance(doc.get(EXTERNAL), dict)
    batch = record_interrupted(project, engine, held, calls, external=external, progress=progress)
    unpoint(project.store_dir, doc)  # an agent's batch: the daemon's pointer goes too
    before = batch.before
    added = sum(1 for c in batch.ledger if c.before is None)
    deleted = sum(1 for c in batch.ledger if c.after is None)
    modified = len(batch.ledger) - added - deleted
    return (
        f"recorded interrupted batch {batch.seq} of session {batch.session} from its state "
        f"before ({short(before) if before else 'none'}): +{added:,} ~{modified:,} -{deleted:,}"
    )
