"""The engine: runs a batch of tool calls and records exactly what it changed.

What it restages before and after each call is the snapshot policy
(``policy``); what it believes is on disk is the policy's ``Belief``. Ledger
lines are attributed to a call when the state before the call was exact (a
full restage, or a tracker that saw everything); otherwise to "restage".

Durability (docs/ARCHITECTURE.md, "Crashes"): once the state before the
first mutating call is recorded, an *intent* is committed (reserving the
batch's number) before anything runs; the batch then commits at its one
commit point (``commit``). A process that dies in between leaves the intent,
and the next command records the batch from it (``recovery``). A failure to
record the state after a call (a full disk) is never turned into "changed
nothing": the batch stays an intent, undo refuses to step over it, and the
error says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from earshot.agent.core.batch import Batch, BatchKind, Change
from earshot.agent.core.calls import (
    Bash,
    Call,
    CallResult,
    ReadFile,
    describe,
    error_text,
)
from earshot.agent.core.command import CommandRunner, run_command, shell_argv
from earshot.agent.core.commit import Draft, Marks, begin_intent, commit_batch, others_running
from earshot.agent.core.conversation import BatchLinker
from earshot.agent.core.git_fingerprint import noticing_git_changes
from earshot.agent.core.outside import OutsideRecorder, left_running
from earshot.agent.core.policy import BatchState, Restager, budget_from_env
from earshot.agent.core.records import OUTSIDE, get_session
from earshot.agent.core.tools import (
    Classifier,
    Tools,
    default_classifier,
    write_run_from,
    write_target,
)
from earshot.agent.core.tracker import ChangeTracker
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held, Intent
from earshot.cas.logs import get_logger
from earshot.cas.project import Project

log = get_logger("earshot.agent")

_NOT_UNDOABLE = (
    "{0}: written, but not recorded ({1}, e.g. over EARSHOT_MAX_FILE_SIZE): "
    "undo cannot take this write back"
)
#: The kind of intent a batch of tool calls leaves while it runs.
INTENT_CALLS = "calls"

__all__ = ["Engine", "Outcome", "shell_argv"]


class BatchNotRecorded(EarshotError):
    """The calls ran (some of them), but the state after them could not be recorded."""

    def __init__(self, cause: BaseException, seq: int) -> None:
        reason = str(cause) if isinstance(cause, EarshotError) else error_text(cause)
        super().__init__(
            f"{reason}; batch {seq} ran but is not recorded yet: it is kept as "
            "interrupted, undo will not step over it, and the next earshot command "
            "that can write the store records it ('earshot log' shows it)"
        )
        self.cause = cause
        self.seq = seq


#: Called with each batch right after it commits (``Engine.on_batch``).
BatchHook = Callable[[Batch], None]


class UnknownSession(EarshotError):
    def __init__(self, session: str) -> None:
        super().__init__(f"no session {session!r} in this project (see 'earshot sessions')")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A recorded batch and what each call returned."""

    batch: Batch
    results: tuple[CallResult, ...]
    #: A signal earshot received while a command ran (passed on to it); the
    #: calls after it did not run. The caller exits 128 + this.
    interrupted_by: int | None = None
    #: What changed outside any call before or between the calls, recorded
    #: as batches of their own (``outside``): said with the outcome.
    outside: tuple[Batch, ...] = ()


class Engine:
    """Runs one session's batches against one project."""

    def __init__(
        self,
        project: Project,
        session: str,
        *,
        tracker: ChangeTracker | None = None,
        budget_ns: int | None = None,
        classifier: Classifier = default_classifier,
        capture_output: bool = True,
        on_batch: BatchHook | None = None,
        link_conversation: bool = True,
        runner: CommandRunner = run_command,
    ) -> None:
        self.project = project
        self.root = str(project.root)
        with project.store.backend.read() as view:
            record = get_session(view, session)
        if record is None:
            raise UnknownSession(session)
        #: The session's state as this process knows it (``record`` merges it).
        self.session = record
        self.policy = Restager(
            project, record.id, tracker, budget_from_env() if budget_ns is None else budget_ns
        )
        #: ``runner`` runs the shell commands (a daemon's: its client does).
        self.tools = Tools(project, self.policy, classifier, runner)
        self.capture = capture_output
        if on_batch is None and link_conversation and record.id != OUTSIDE:
            on_batch = BatchLinker(project, record.id)
        #: Called after each batch commits; by default it links the batch into
        #: the session's conversation log at its current leaf.
        self.on_batch = on_batch
        #: Interrupted operations (intents) finished by this process before it
        #: began its own work: a command re-run after a kill can tell it is done.
        self.settled: tuple[Intent, ...] = ()
        #: Records what changed outside any call (``outside``).
        self.outside = OutsideRecorder(project)

    def finished_interrupted(self, kind: str) -> Intent | None:
        """An interrupted operation of ``kind`` in this session that was just finished."""
        for intent in self.settled:
            if intent.kind == kind and intent.doc.get("session") == self.session.id:
                return intent
        return None

    # -- running a batch ------------------------------------------------------

    def run_batch(self, calls: Sequence[Call], labels: Sequence[str] | None = None) -> Outcome:
        """Run the calls of one model turn and record them as one batch."""
        self._refuse_outside()
        self.policy.batch = BatchState(started_ns=time.time_ns(), stale=True)
        return self._run_calls(calls, labels)

    def run_dispatch(self, children: Sequence[Sequence[Call]]) -> Outcome:
        """Write-capable subagents: one snapshot before any child, one batch for all.

        The children run one after another here; each child's writes are
        ledgered call by call, and undo treats the whole dispatch as one unit.
        """
        self._refuse_outside()
        calls: list[Call] = []
        labels: list[str] = []
        for number, child in enumerate(children, start=1):
            calls.extend(child)
            labels.extend(f"subagent {number}" for _ in child)
        # The dispatch's own snapshot is exact, and covers what the session wrote.
        self.policy.batch = BatchState(started_ns=time.time_ns(), written_fresh=True)
        self.policy.full("before a subagent dispatch")
        return self._run_calls(calls, labels)

    def _refuse_outside(self) -> None:
        if self.session.id == OUTSIDE:
            raise EarshotError(
                f"session '{OUTSIDE}' holds what changed outside any call: it runs no calls "
                "(undo and redo work on it)"
            )

    def _run_calls(self, calls: Sequence[Call], labels: Sequence[str] | None) -> Outcome:
        self.outside.reset()
        described = []
        for index, call in enumerate(calls):
            doc = describe(call)
            if labels is not None:
                doc["agent"] = labels[index]
            described.append(doc)
        ledger: list[Change] = []
        results: list[CallResult] = []
        before: Digest | None = None
        held: Held | None = None
        folded = False
        stopped: int | None = None
        index = 0
        try:
            while index < len(calls):
                call = calls[index]
                if stopped is not None:
                    why = f"not run: earshot received signal {stopped} during an earlier call"
                    results.append(CallResult(index, describe(call)["tool"], False, error=why))
                    index += 1
                    continue
                prepared = self.tools.prepare(index, call)
                if isinstance(prepared, CallResult):
                    results.append(prepared)
                    index += 1
                    continue
                call = prepared
                if isinstance(call, ReadFile):
                    results.append(self.tools.read(index, call))
                    index += 1
                    continue
                run: list[tuple[int, Call | CallResult]] = []
                if not isinstance(call, Bash):
                    run = [(index, call)]
                    following = write_run_from(calls, index + 1)
                    run += [(i, self.tools.prepare(i, c)) for i, c in following]
                targets = {t for _, c in run if (t := write_target(self.root, c)) is not None}
                destructive = self.tools.judge(call)
                rec = self.policy.before_call(
                    writes=not isinstance(call, Bash),
                    destructive=destructive,
                    targets=targets,
                    written=self.session.written,
                    doomed=self.tools.doomed(call),
                )
                self.note_outside(start=held is None, ledger=ledger)
                if held is None:
                    before = rec.digest if rec is not None else self.project.head_snapshot()
                    held = self.begin_intent(INTENT_CALLS, before, {"calls": described})
                if run:
                    done, wrote = self.tools.write_run(run, held, ledger)
                    results.extend(done)
                    self.remember_written(wrote)
                    index = run[-1][0] + 1
                    continue
                assert isinstance(call, Bash)
                with noticing_git_changes(self.root) as git:  # not covered by undo: said
                    result, was_folded, stopped = self.tools.bash(
                        index,
                        call.command,
                        destructive=destructive,
                        ledger=ledger,
                        held=held,
                        capture=self.capture,
                    )
                folded |= was_folded
                results.append(replace(result, git=tuple(git.paths)))
                group = left_running(held.notes(), index)
                if group is not None:
                    self.outside.left.append((group, call.command))
                index += 1
            after = self.project.head_snapshot() if before is not None else None
            draft = Draft(BatchKind.CALLS, tuple(described), before, after, ledger, folded=folded)
            batch = self.record(draft, held=held)
        except BaseException as exc:
            if held is None:
                raise
            held.close()  # the intent stays: the next command records the batch
            if isinstance(exc, EarshotError | OSError):
                raise BatchNotRecorded(exc, int(held.intent.doc["seq"])) from exc
            raise
        return Outcome(batch, tuple(results), stopped, tuple(self.outside.recorded))

    def _exact_tree(self) -> Digest | None:
        belief = self.policy.belief
        return belief.tree if belief.exact else None

    def note_outside(self, *, start: bool, ledger: list[Change] | None = None) -> None:
        """After the restage before a call: record what changed outside any call
        since the settled state (``start``: no batch of this process is open) or
        since the last restage of the open batch (``outside``)."""
        policy = self.policy
        if start:
            self.outside.at_start(self.session.id, policy.found)
        else:
            self.outside.mid_batch(
                self.session.id, policy.previous, policy.found, ledger, policy.batch.started_ns
            )

    # -- the calls ------------------------------------------------------------

    def remember_written(self, paths: Sequence[str] | Mapping[str, Any]) -> None:
        """Paths a write_file or edit of this session wrote: re-read before its next write."""
        known = set(self.session.written)
        fresh = [rel for rel in paths if rel not in known]
        if fresh:
            self.session = replace(self.session, written=(*self.session.written, *fresh))

    # -- earshot's own changes (undo, redo, rewind) ---------------------------

    def begin_own_changes(self) -> tuple[Digest | None, set[str]]:
        """Before earshot itself changes files: the tree to record the state before
        them on, and the paths to read again (``Policy.begin_own_changes``)."""
        return self.policy.begin_own_changes()

    def end_own_changes(self, tree: Digest) -> None:
        """After earshot itself changed files, recorded as ``tree``: fold in what the
        watcher saw."""
        self.policy.end_own_changes(tree)

    # -- the intent and the commit point ----------------------------------------

    def _anchor(self) -> str | None:
        """The conversation's current leaf, where this batch hangs (None: no log)."""
        leaf = getattr(self.on_batch, "leaf", None)
        if leaf is None:
            return None
        try:
            result = leaf()
        except (OSError, EarshotError):
            return None
        return None if result is None else str(result)

    def begin_intent(
        self,
        kind: str,
        before: Digest | None,
        doc: Mapping[str, Any],
        holder: tuple[int, int | None] | None = None,
    ) -> Held:
        """Reserve the next batch number and commit an intent for it (``commit``).

        After this returns, the operation may change files: whatever happens
        to this process, the next command finds the intent.
        """
        held = begin_intent(
            self.project,
            self.session,
            kind,
            before=before,
            anchor=self._anchor(),
            doc=doc,
            holder=holder,
        )
        self.policy.batch.overlap = others_running(self.project, self.session.id, held)
        return held

    def record(
        self,
        draft: Draft,
        *,
        held: Held | None = None,
        marks: Marks | None = None,
        then: Held | None = None,
    ) -> Batch:
        """Commit a batch at its one commit point (``commit``), then link it.

        ``marks(seq)``: the fields to set on other batches (``undone_by``...);
        ``then``: an intent for what must follow, started in the same
        transaction.
        """
        batch_state = self.policy.batch
        overlap = batch_state.overlap or others_running(self.project, self.session.id, held)
        started = held.intent.started_ns if held is not None else time.time_ns()
        started = min(started, batch_state.started_ns or started)
        batch_state.overlap = False
        batch, self.session = commit_batch(
            self.project,
            draft,
            session=self.session,
            held=held,
            started_ns=started,
            overlap=overlap,
            watch_mark=self.policy.belief.watch_mark(),
            marks=marks,
            then=then,
            settles=self.outside.settles(draft, self._exact_tree()),
        )
        if held is not None:
            held.release()
        log.info(
            "batch",
            session=batch.session,
            seq=batch.seq,
            kind=draft.kind.value,
            changes=len(batch.ledger),
        )
        if self.on_batch is not None:
            self.on_batch(batch)
        return batch
