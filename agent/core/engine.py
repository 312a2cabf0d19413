"""The engine: runs a batch of tool calls and records exactly what it changed.

It follows the snapshot policy of DESIGN.md:

- ``read_file``/``edit``: nothing.
- ``write_file`` (and the read-edit-write ``edit`` tool): before, a scoped
  restage of the paths this session has written plus the targets (and what
  the watcher saw); after, a ledger line per target. Consecutive writes are
  restaged together, once before and once after the run, so a batch of N
  writes costs two restages, not 2N.
- ``bash`` judged destructive: a full restage before; after, the watcher's
  paths, else a full restage. With a gap-free watcher the restage before is
  scoped to what it saw: that records the same state, at the change's cost.
- other ``bash``: before, the watcher's paths if it is healthy, else nothing;
  after, the watcher's paths, else a full restage when the last one was under
  the budget, else the change is *folded* into the next snapshot.
- the first mutating call of a process: a full restage, unless the watch
  daemon vouches for a gap-free watch since the last batch's watch mark.
- a watcher gap: the next snapshot is a full restage.
- the first command of a later batch without a watcher re-reads the tree
  when that is cheap, else stops vouching (see docs/ARCHITECTURE.md).

Ledger lines are attributed to a call when the state before the call was
exact (a full restage, or a tracker that saw everything); otherwise to
"restage".

Durability (docs/ARCHITECTURE.md, "Crashes"): once the state before the
first mutating call is recorded, an *intent* is committed (reserving the
batch's number) before anything runs; the batch record, the session's
state, the watch mark and the intent's end then commit in one transaction,
the batch's commit point. A process that dies in between leaves the intent,
and the next command records the batch from it (``earshot.agent.core.recovery``).
A failure to record the state after a call (a full disk) is never turned
into "changed nothing": the batch stays an intent, undo refuses to step
over it, and the error says so.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from earshot.agent.core.calls import (
    Bash,
    Call,
    CallResult,
    EditFile,
    ReadFile,
    WriteFile,
    describe,
    edit,
)
from earshot.agent.core.command import run_command, shell_argv
from earshot.agent.core.files import prepare_call, read_text_file, write_text_file
from earshot.agent.core.git_fingerprint import noticing_git_changes
from earshot.agent.core.records import (
    BY_RESTAGE,
    Batch,
    BatchKind,
    Change,
    SessionRecord,
    State,
    get_batch,
    get_session,
    put_batch,
    put_session,
)
from earshot.agent.core.tracker import ChangeTracker, NullTracker
from earshot.cas import faults
from earshot.cas.backend import WriteBatch
from earshot.cas.diff import diff_trees
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held, Intent, end_intent, put_intent
from earshot.cas.logs import get_logger
from earshot.cas.lookup import lookup
from earshot.cas.project import Project, Recorded
from earshot.cas.restage import relative_path

log = get_logger("earshot.agent")

DEFAULT_BUDGET_NS = 200_000_000
_KEEP = object()
_WATCH_MARK = b"watch-mark"
_NOT_UNDOABLE = (
    "{0}: written, but not recorded ({1}, e.g. over EARSHOT_MAX_FILE_SIZE): "
    "undo cannot take this write back"
)
#: The kind of intent a batch of tool calls leaves while it runs.
INTENT_CALLS = "calls"

__all__ = ["Engine", "Outcome", "shell_argv"]


def load_watch_mark(project: Project) -> tuple[str, Digest] | None:
    """The daemon token and tree the last exact batch ended on, if any."""
    with project.store.backend.read() as view:
        raw = view.get("meta", _WATCH_MARK)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        return str(doc["token"]), Digest(bytes.fromhex(doc["tree"]))
    except (ValueError, KeyError, TypeError):
        return None


#: Overrides the budget, in milliseconds, for every engine of this process.
ENV_BUDGET_MS = "EARSHOT_RESTAGE_BUDGET_MS"


def budget_from_env() -> int:
    """The restage budget: $EARSHOT_RESTAGE_BUDGET_MS, else 200 ms."""
    raw = os.environ.get(ENV_BUDGET_MS)
    if raw is None:
        return DEFAULT_BUDGET_NS
    try:
        return int(float(raw) * 1_000_000)
    except ValueError:
        raise BadBudget(raw) from None


class BadBudget(EarshotError):
    def __init__(self, raw: str) -> None:
        super().__init__(f"{ENV_BUDGET_MS}={raw!r} is not a number of milliseconds")


class BatchNotRecorded(EarshotError):
    """The calls ran (some of them), but the state after them could not be recorded."""

    def __init__(self, cause: BaseException, seq: int) -> None:
        reason = str(cause) if isinstance(cause, EarshotError) else _reason(cause)
        super().__init__(
            f"{reason}; batch {seq} ran but is not recorded yet: it is kept as "
            "interrupted, undo will not step over it, and the next earshot command "
            "that can write the store records it ('earshot log' shows it)"
        )
        self.cause = cause
        self.seq = seq


Classifier = Callable[[str, Callable[[str], bool]], bool]
#: Called with each batch right after it commits (``Engine.on_batch``).
BatchHook = Callable[[Batch], None]


def default_classifier(command: str, exists: Callable[[str], bool]) -> bool:
    from earshot.agent.shell.destructive import (
        classify,  # the shell grammar loads only when a command runs
    )

    return classify(command, exists).destructive


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


class Engine:
    """Runs one session's batches against one project."""

    def __init__(
        self,
        project: Project,
        session: str,
        tracker: ChangeTracker | None = None,
        budget_ns: int | None = None,
        classifier: Classifier = default_classifier,
        capture_output: bool = True,
        on_batch: BatchHook | None = None,
        link_conversation: bool = True,
    ) -> None:
        self.project = project
        self.root = str(project.root)
        with project.store.backend.read() as view:
            record = get_session(view, session)
        if record is None:
            raise UnknownSession(session)
        self.session = record
        self.tracker = tracker or NullTracker()
        self.budget_ns = budget_from_env() if budget_ns is None else budget_ns
        self.classifier = classifier
        self.capture = capture_output
        if on_batch is None and link_conversation:
            from earshot.agent.core.conversation import BatchLinker  # imports this module

            on_batch = BatchLinker(project, record.id)
        #: Called after each batch commits; by default it links the batch into
        #: the session's conversation log at its current leaf.
        self.on_batch = on_batch
        #: The tree believed to be on disk, and whether that belief is exact.
        self.tree: Digest | None = None
        self.exact = False
        self._token: object = None
        self._first_done = False
        self._stale = False
        self._watching = not isinstance(self.tracker, NullTracker)
        #: Whether this batch has restaged every path the session wrote.
        self._written_fresh = False
        #: Paths this batch's writes name: recorded whatever the ignore rules say.
        self._forced: set[str] = set()
        #: Another session's batch was running when this batch began.
        self._overlap = False
        #: When the current batch began (before its first restage).
        self._started_ns = 0
        #: Interrupted operations (intents) finished by this process before it
        #: began its own work: a command re-run after a kill can tell it is done.
        self.settled: tuple[Intent, ...] = ()

    def finished_interrupted(self, kind: str) -> Intent | None:
        """An interrupted operation of ``kind`` in this session that was just finished."""
        for intent in self.settled:
            if intent.kind == kind and intent.doc.get("session") == self.session.id:
                return intent
        return None

    # -- snapshots ------------------------------------------------------------

    def _full(self, note: str) -> Recorded:
        log.debug("policy", restage="full", why=note)
        token = self.tracker.token()  # before the walk: a change during it is reported next
        rec = self.project.record(
            None, note=note, session=self.session.id, listed=False, forced=self._forced
        )
        self._stale = False
        self.tree, self.exact, self._token = rec.snapshot.tree, True, token
        return rec

    def _scoped(self, paths: set[str], note: str, token: object = _KEEP) -> Recorded:
        """Restage ``paths`` on the believed tree; ``token``: what the tracker gave with them."""
        assert self.tree is not None
        log.debug("policy", restage="scoped", paths=len(paths), why=note)
        rec = self.project.record(
            sorted(paths),
            base=self.tree,
            note=note,
            session=self.session.id,
            listed=False,
            forced=self._forced & paths,
        )
        self.tree = rec.snapshot.tree
        if token is not _KEEP:
            self._token = token
        return rec

    def _seen(self) -> set[str] | None:
        """What the tracker saw since the last sync point; moves the sync point on."""
        seen, self._token = self.tracker.advance(self._token)
        return seen

    def _vouched_start(self) -> tuple[bool, Recorded | None]:
        """The first call of a process, when a daemon watched gap-free since the last batch.

        (True, what was restaged) when it vouches; (False, None) when a full
        restage is due.
        """
        mark = load_watch_mark(self.project) if self._watching else None
        head = self.project.head_snapshot()
        if mark is None or head is None:
            return False, None
        token, tree = mark
        if self.project.read_snapshot(head).tree != tree:
            return False, None
        seen, nxt = self.tracker.advance(token)
        if seen is None:
            return False, None
        self.tree, self.exact, self._token = tree, True, nxt
        log.debug("policy", restage="vouched", paths=len(seen))
        if not seen:
            return True, None
        return True, self._scoped(seen, "the watcher vouches since the last batch")

    def _cheap(self) -> bool:
        cost = self.project.full_restage_cost_ns()
        return cost is not None and cost <= self.budget_ns

    def _before_call(
        self, call: Call, destructive: Callable[[], bool], targets: set[str]
    ) -> Recorded | None:
        """Bring the recorded state up to date as the policy asks before ``call``.

        ``targets``: the paths the write run starting with ``call`` will write.
        What the writes name is recorded whatever the ignore rules say, before
        and after: a write of an ignored ``.env`` can be undone.
        """
        self._forced |= targets
        if not self._first_done or self.tree is None:
            self._first_done = True
            vouched, rec = self._vouched_start()
            if vouched:
                return rec
            self._written_fresh = True
            return self._full("before the first call of a process")
        seen = self._seen()
        if seen is None and self._watching:
            self._written_fresh = True
            return self._full("the watcher had a gap")
        if (seen is None or not self.exact) and destructive():
            self._written_fresh = True
            return self._full("before a destructive command")
        # With a gap-free watcher, restaging what it saw brings every path up to
        # date: the same state a full restage would record, at the cost of the
        # change (so a destructive command gets a scoped restage here too).
        if self._stale and seen is None and isinstance(call, Bash):
            # Without a watcher, anything may have changed since the last batch
            # (the person, another tool). A command's changes are found by
            # diffing whole trees, so re-read it all while that is cheap; else
            # stop vouching, so what a restage finds is not pinned on the call.
            self._stale = False
            if self._cheap():
                self._written_fresh = True
                return self._full("a new batch, no watcher")
            self.exact = False
        if isinstance(call, WriteFile | EditFile):
            paths = set(targets)
            if not self._written_fresh:
                # The person may have changed what the session wrote since its
                # last batch: once per batch, re-read all of it.
                paths |= set(self.session.written)
                self._written_fresh = True
            if seen is not None:
                paths |= seen
            return self._scoped(paths, "before write_file")
        if seen is not None:
            return self._scoped(seen, "before bash (watcher)") if seen else None
        return None

    def _state(self, tree: Digest | None, path: str) -> State | None:
        if tree is None:
            return None
        with self.project.store.reader() as reader:
            return State.of(lookup(reader, tree, path))

    def _diff(self, old: Digest, new: Digest, by: int | str) -> list[Change]:
        with self.project.store.reader() as reader:
            return [
                Change(c.path, State.of(c.old), State.of(c.new), by)
                for c in diff_trees(reader, old, new)
                if State.of(c.old) != State.of(c.new)
            ]

    # -- the intent -----------------------------------------------------------

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

    def begin_intent(self, kind: str, before: Digest | None, doc: Mapping[str, Any]) -> Held:
        """Reserve the next batch number and commit an intent for it, in one transaction.

        After this returns, the operation may change files: whatever happens
        to this process, the next command finds the intent.
        """
        fields: dict[str, Any] = {
            "session": self.session.id,
            "before": before.hex() if before is not None else None,
            "anchor": self._anchor(),
            **doc,
        }
        held = self.project.intents.new(kind, fields)
        try:
            with self.project.store.backend.write() as txn:
                current = get_session(txn, self.session.id) or self.session
                held.intent = replace(held.intent, doc={**fields, "seq": current.next_seq})
                put_session(txn, replace(current, next_seq=current.next_seq + 1))
                put_intent(txn, held.intent)
        except BaseException:
            held.release()
            raise
        faults.point("intent-begun")
        self._overlap = self._others_running(held)
        return held

    def _others_running(self, held: Held | None) -> bool:
        """Whether a batch of another session is running on this root right now."""
        intents = self.project.intents
        return any(
            i.doc.get("session") not in (None, self.session.id)
            and (held is None or i.id != held.id)
            and intents.is_live(i)
            for i in intents.pending()
        )

    # -- calls --------------------------------------------------------------

    def _write_run(
        self, run: list[tuple[int, Call | CallResult]], held: Held, ledger: list[Change]
    ) -> list[CallResult]:
        """Write and edit calls in a row (reads between them too): restaged once after.

        ``run`` holds prepared calls, or the results of calls refused already.
        """
        pre = self.tree
        results: list[CallResult] = []
        wrote: dict[str, int] = {}
        for index, call in run:
            if isinstance(call, CallResult):
                results.append(call)
                continue
            tool = describe(call)["tool"]
            if isinstance(call, ReadFile):
                results.append(self._read(index, call))
                continue
            assert isinstance(call, WriteFile | EditFile)
            try:
                rel = relative_path(self.root, call.path)
                if isinstance(call, EditFile):
                    old = read_text_file(self.root, call.path).decode("utf-8", "surrogateescape")
                    new = edit(old, call.old, call.new, call.all)
                    data = new.encode("utf-8", "surrogateescape")
                else:
                    data = call.content
                write_text_file(self.root, rel, data, temp_tag=held.id)
            except (OSError, EarshotError, ValueError) as exc:
                results.append(CallResult(index, tool, False, error=_reason(exc)))
                continue
            held.note(call=index, path=rel, digest=blob_digest(data).hex())
            faults.point("batch-write")
            wrote[rel] = index
            results.append(CallResult(index, tool, True))
        if not wrote:
            return results
        # The watcher saw these writes too: move its sync point past them.
        seen = self._seen() if self._watching else None
        self._scoped(set(wrote) | (seen or set()), "after write_file")
        for rel, index in wrote.items():
            before, after = self._state(pre, rel), self._state(self.tree, rel)
            if before != after:
                ledger.append(Change(rel, before, after, index))
            if after is not None and not after.recorded:
                at = next(i for i, r in enumerate(results) if r.index == index)
                results[at] = replace(results[at], warning=_NOT_UNDOABLE.format(rel, after.reason))
        known = set(self.session.written)
        fresh = [rel for rel in wrote if rel not in known]
        if fresh:
            self.session = replace(self.session, written=(*self.session.written, *fresh))
        return results

    def _prepare(self, index: int, call: Call) -> Call | CallResult:
        """The call with its path resolved and checked, or the result refusing it.

        An in-root link is followed to the file really written; ``.git``, the
        data dir and NUL bytes are refused before anything is restaged.
        """
        try:
            return prepare_call(self.root, call, self.project.options.exclude_dirs)
        except (OSError, EarshotError, ValueError) as exc:
            return CallResult(index, describe(call)["tool"], False, error=_reason(exc))

    def _read(self, index: int, call: ReadFile) -> CallResult:
        try:
            text = read_text_file(self.root, call.path).decode("utf-8", "replace")
            return CallResult(index, "read_file", True, output=text)
        except (OSError, EarshotError, ValueError) as exc:
            return CallResult(index, "read_file", False, error=_reason(exc))

    def _bash(
        self,
        index: int,
        command: str,
        destructive: Callable[[], bool],
        ledger: list[Change],
        held: Held,
    ) -> tuple[CallResult, bool, int | None]:
        """Run a command; returns its result, whether it was folded, and a signal received."""
        pre, exact_pre = self.tree, self.exact
        try:
            ran = run_command(
                shell_argv(command),
                self.root,
                self.capture,
                on_start=lambda pgid, start: held.note(call=index, pgid=pgid, start=start),
            )
        except OSError as exc:  # the shell itself could not start
            return CallResult(index, "bash", False, error=_reason(exc)), False, None
        result = CallResult(index, "bash", True, output=ran.output, exit_code=ran.returncode)
        faults.point("batch-command")
        seen = self._seen()
        assert pre is not None
        by = index if exact_pre else BY_RESTAGE
        if seen is not None or destructive() or self._cheap() or ran.interrupted_by is not None:
            if seen is None:
                self._full("after bash")
            elif seen:
                self._scoped(seen, "after bash (watcher)")
            ledger.extend(self._diff(pre, self.tree or pre, by))
            # The tree this call left, for whoever records the batch if this
            # process dies before it does (recovery attributes by it).
            held.note(call=index, tree=(self.tree or pre).hex(), by=by)
            return result, False, ran.interrupted_by
        self.exact = False  # its changes go into the next snapshot, unattributed
        log.info("folded", command=command)
        return result, True, None

    def begin_own_changes(self) -> None:
        """Before earshot itself changes files (undo, redo, rewind).

        Adopt the watcher's picture when it vouches, so the batch these changes
        make can leave a watch mark and the next process need not walk the tree.
        """
        if not self._first_done:
            self._first_done, _ = self._vouched_start()

    def end_own_changes(self) -> None:
        """After earshot itself changed files: fold in what the watcher saw."""
        if not (self._first_done and self.exact and self._watching):
            self.exact = False
            return
        # What earshot wrote is recorded in the head (a scoped restage of every
        # path it touched); building on it keeps the store's counts for free.
        head = self.project.head_snapshot()
        if head is not None:
            self.tree = self.project.read_snapshot(head).tree
        seen = self._seen()
        if seen is None:
            self.exact = False
        elif seen:
            self._scoped(seen, "after earshot's own changes (watcher)")

    def _judge(self, call: Call) -> Callable[[], bool]:
        """Whether ``call`` may destroy data, asked only when the answer matters.

        With a gap-free watcher every call gets the same scoped restages, so the
        shell grammar (~30 ms to load) is not even loaded.
        """
        verdict: list[bool] = []

        def destructive() -> bool:
            if not verdict:
                verdict.append(
                    isinstance(call, Bash) and self.classifier(call.command, self._exists)
                )
            return verdict[0]

        return destructive

    def _exists(self, path: str) -> bool:
        return os.path.lexists(os.path.join(self.root, path))

    def run_batch(self, calls: Sequence[Call], labels: Sequence[str] | None = None) -> Outcome:
        """Run the calls of one model turn and record them as one batch."""
        self._started_ns = time.time_ns()
        self._stale = True
        self._written_fresh = False
        self._forced = set()
        return self._run_calls(calls, labels)

    def _run_calls(self, calls: Sequence[Call], labels: Sequence[str] | None) -> Outcome:
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
                prepared = self._prepare(index, call)
                if isinstance(prepared, CallResult):
                    results.append(prepared)
                    index += 1
                    continue
                call = prepared
                if isinstance(call, ReadFile):
                    results.append(self._read(index, call))
                    index += 1
                    continue
                run: list[tuple[int, Call | CallResult]] = []
                if not isinstance(call, Bash):
                    run = [(index, call)]
                    run += [(i, self._prepare(i, c)) for i, c in _write_run(calls, index + 1)]
                targets = {t for _, c in run if (t := _target(self.root, c)) is not None}
                destructive = self._judge(call)
                rec = self._before_call(call, destructive, targets)
                if held is None:
                    before = rec.digest if rec is not None else self.project.head_snapshot()
                    held = self.begin_intent(INTENT_CALLS, before, {"calls": described})
                if run:
                    results.extend(self._write_run(run, held, ledger))
                    index = run[-1][0] + 1
                    continue
                assert isinstance(call, Bash)
                with noticing_git_changes(self.root) as git:  # not covered by undo: said
                    result, was_folded, stopped = self._bash(
                        index, call.command, destructive, ledger, held
                    )
                folded |= was_folded
                results.append(replace(result, git=tuple(git.paths)))
                index += 1
            after = self.project.head_snapshot() if before is not None else None
            batch = self.record(
                BatchKind.CALLS,
                tuple(described),
                before,
                after,
                ledger,
                folded=folded,
                held=held,
            )
        except BaseException as exc:
            if held is None:
                raise
            held.close()  # the intent stays: the next command records the batch
            if isinstance(exc, EarshotError | OSError):
                raise BatchNotRecorded(exc, int(held.intent.doc["seq"])) from exc
            raise
        return Outcome(batch, tuple(results), stopped)

    def run_dispatch(self, children: Sequence[Sequence[Call]]) -> Outcome:
        """Write-capable subagents: one snapshot before any child, one batch for all.

        The children run one after another here; each child's writes are
        ledgered call by call, and undo treats the whole dispatch as one unit.
        """
        calls: list[Call] = []
        labels: list[str] = []
        for number, child in enumerate(children, start=1):
            calls.extend(child)
            labels.extend(f"subagent {number}" for _ in child)
        self._first_done = True
        self._full("before a subagent dispatch")
        self._stale = False  # the dispatch's own snapshot is exact
        self._written_fresh = True
        return self._run_calls(calls, labels)

    def record(
        self,
        kind: BatchKind,
        calls: tuple[dict[str, Any], ...],
        before: Digest | None,
        after: Digest | None,
        ledger: list[Change],
        *,
        folded: bool = False,
        targets: tuple[int, ...] = (),
        held: Held | None = None,
        marks: Callable[[int], Mapping[int, Mapping[str, Any]]] | None = None,
        interrupted: bool = False,
        then: Held | None = None,
    ) -> Batch:
        """Commit a batch: its one commit point.

        In one transaction: the batch record (under the number its intent
        reserved), the session's state, the watch mark, the marks it sets on
        other batches (``marks(seq)`` -> {seq: fields}, e.g. ``undone_by``),
        the end of its intent, and the start of ``then`` (an intent for what
        must follow, made by the caller). Nothing a reader needs is written
        after.
        """
        now = time.time_ns()
        overlap = self._overlap or self._others_running(held)
        self._overlap = False
        started = held.intent.started_ns if held is not None else now
        started = min(started, self._started_ns or started)
        faults.point("batch-commit")
        with self.project.store.backend.write() as txn:
            beside = _ran_beside(txn, self.session.id, started, now) or overlap
            if beside and kind is BatchKind.CALLS:
                ledger = _ambiguous(ledger, calls)
            current = get_session(txn, self.session.id) or self.session
            seq = int(held.intent.doc["seq"]) if held is not None else current.next_seq
            anchor = held.intent.doc.get("anchor") if held is not None else None
            batch = Batch(
                session=self.session.id,
                seq=seq,
                kind=kind,
                time_ns=now,
                calls=calls,
                before=before,
                after=after,
                ledger=tuple(merge_ledger(ledger)),
                folded=folded,
                targets=targets,
                interrupted=interrupted,
                anchor=anchor if isinstance(anchor, str) else None,
            )
            put_batch(txn, batch)
            for other, fields in (marks(seq) if marks is not None else {}).items():
                marked = get_batch(txn, self.session.id, other)
                if marked is not None:
                    put_batch(txn, replace(marked, **fields))
            # A daemon's token, with the tree it vouches for: the next process may
            # then trust the watcher instead of walking the tree (DESIGN.md).
            token = self._token
            if self.exact and isinstance(token, str) and self.tree is not None:
                mark = {"token": token, "tree": self.tree.hex()}
                txn.put("meta", _WATCH_MARK, json.dumps(mark).encode())
            else:
                txn.delete("meta", _WATCH_MARK)
            written = tuple(dict.fromkeys((*current.written, *self.session.written)))
            self.session = SessionRecord(
                current.id, current.created_ns, now, max(current.next_seq, seq + 1), written
            )
            put_session(txn, self.session)
            if held is not None:
                end_intent(txn, held.intent)
            if then is not None:
                put_intent(txn, then.intent)
        if held is not None:
            held.release()
        log.info("batch", session=batch.session, seq=seq, kind=kind.value, changes=len(ledger))
        if self.on_batch is not None:
            self.on_batch(batch)
        return batch


def _target(root: str, call: Call | CallResult) -> str | None:
    """The root-relative path a write or edit call names (None if it names none)."""
    if not isinstance(call, WriteFile | EditFile):
        return None
    try:
        return relative_path(root, call.path)
    except (EarshotError, ValueError):
        return None


def _write_run(calls: Sequence[Call], start: int) -> list[tuple[int, Call]]:
    """The write/edit calls from ``start`` on, with the reads between them, up to a command."""
    run: list[tuple[int, Call]] = []
    for index in range(start, len(calls)):
        call = calls[index]
        if isinstance(call, Bash):
            break
        run.append((index, call))
    while run and isinstance(run[-1][1], ReadFile):
        run.pop()  # trailing reads run after the run's restage, as ever
    return run


#: The last batches of every session on this root: (session, start, end) in ns.
_RECENT = b"recent-batches"
_RECENT_KEEP = 64


def _ran_beside(txn: WriteBatch, session: str, started: int, now: int) -> bool:
    """Whether a batch of another session ended after this one began; notes this one.

    Two agents in one checkout (two terminals, an agent beside earshot chat):
    what changed while both ran cannot be told apart by diffing trees.
    """
    raw = txn.get("meta", _RECENT)
    try:
        recent = json.loads(raw) if raw else []
    except ValueError:
        recent = []
    beside = any(
        isinstance(item, list) and len(item) == 3 and item[0] != session and item[2] > started
        for item in recent
    )
    recent = [*recent[-(_RECENT_KEEP - 1) :], [session, started, now]]
    txn.put("meta", _RECENT, json.dumps(recent).encode())
    return beside


def _ambiguous(ledger: list[Change], calls: tuple[dict[str, Any], ...]) -> list[Change]:
    """The ledger of a batch that ran beside another session's: whatever a tree
    diff found (a command's changes, a restage's) may be the other's."""

    def found_by_diff(line: Change) -> bool:
        if not isinstance(line.by, int):
            return True
        return 0 <= line.by < len(calls) and calls[line.by].get("tool") == "bash"

    return [replace(line, ambiguous=True) if found_by_diff(line) else line for line in ledger]


def merge_ledger(lines: list[Change]) -> list[Change]:
    """One line per path: the first line's before, the last line's after."""
    merged: dict[str, Change] = {}
    for line in lines:
        prior = merged.get(line.path)
        if prior is None:
            merged[line.path] = line
        else:
            by = prior.by if prior.by == line.by else line.by
            ambiguous = prior.ambiguous or line.ambiguous
            merged[line.path] = Change(line.path, prior.before, line.after, by, ambiguous)
    return [c for c in merged.values() if c.before != c.after]


def exit_status(signum: int) -> int:
    """The exit status a shell reports for a process ended by ``signum``."""
    return 128 + int(signal.Signals(signum))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return str(exc)
