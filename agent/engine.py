"""The engine: runs a batch of tool calls and records exactly what it changed.

It follows the snapshot policy of DESIGN.md:

- ``read_file``/``edit``: nothing.
- ``write_file``: before, a scoped restage of the paths this session has
  written plus the target (and what the watcher saw); after, a ledger line
  for the target.
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
"restage". Snapshots commit as they are taken; the batch record, which makes
them part of the history, commits last, with the session record.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from earshot.cas.diff import diff_trees
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.lookup import lookup
from earshot.cas.project import Project, Recorded
from earshot.cas.restage import relative_path

from .calls import Bash, Call, CallResult, EditFile, ReadFile, WriteFile, describe, edit
from .files import prepare_call, read_text_file, write_text_file
from .git_fingerprint import noticing_git_changes
from .records import (
    BY_RESTAGE,
    Batch,
    BatchKind,
    Change,
    SessionRecord,
    State,
    get_session,
    put_batch,
    put_session,
)
from .tracker import ChangeTracker, NullTracker

log = get_logger("earshot.agent")

DEFAULT_BUDGET_NS = 200_000_000
_KEEP = object()
_WATCH_MARK = b"watch-mark"


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


Classifier = Callable[[str, Callable[[str], bool]], bool]
#: Called with each batch right after it commits (``Engine.on_batch``).
BatchHook = Callable[[Batch], None]


def default_classifier(command: str, exists: Callable[[str], bool]) -> bool:
    from .destructive import classify  # the shell grammar loads only when a command runs

    return classify(command, exists).destructive


class UnknownSession(EarshotError):
    def __init__(self, session: str) -> None:
        super().__init__(f"no session {session!r} in this project (see 'earshot sessions')")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A recorded batch and what each call returned."""

    batch: Batch
    results: tuple[CallResult, ...]


def shell_argv(command: str) -> list[str]:
    """The user's shell, as a login shell would pick it; /bin/sh otherwise."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    return [shell, "-c", command]


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
            from .conversation import BatchLinker  # imports this module

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

    # -- snapshots ------------------------------------------------------------

    def _full(self, note: str) -> Recorded:
        log.debug("policy", restage="full", why=note)
        token = self.tracker.token()  # before the walk: a change during it is reported next
        rec = self.project.record(None, note=note, session=self.session.id, listed=False)
        self._stale = False
        self.tree, self.exact, self._token = rec.snapshot.tree, True, token
        return rec

    def _scoped(self, paths: set[str], note: str, token: object = _KEEP) -> Recorded:
        """Restage ``paths`` on the believed tree; ``token``: what the tracker gave with them."""
        assert self.tree is not None
        log.debug("policy", restage="scoped", paths=len(paths), why=note)
        rec = self.project.record(
            sorted(paths), base=self.tree, note=note, session=self.session.id, listed=False
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

    def _before_call(self, call: Call, destructive: Callable[[], bool]) -> Recorded | None:
        """Bring the recorded state up to date as the policy asks before ``call``."""
        if not self._first_done or self.tree is None:
            self._first_done = True
            vouched, rec = self._vouched_start()
            if vouched:
                return rec
            return self._full("before the first call of a process")
        seen = self._seen()
        if seen is None and self._watching:
            return self._full("the watcher had a gap")
        if (seen is None or not self.exact) and destructive():
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
                return self._full("a new batch, no watcher")
            self.exact = False
        if isinstance(call, WriteFile | EditFile):
            paths = set(self.session.written) | {relative_path(self.root, call.path)}
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

    # -- calls --------------------------------------------------------------

    def _write(self, index: int, path: str, data: bytes, ledger: list[Change]) -> None:
        rel = relative_path(self.root, path)
        pre = self.tree
        write_text_file(self.root, rel, data)
        # The watcher saw this write too: move its sync point past it.
        seen = self._seen() if self._watching else None
        self._scoped({rel} | (seen or set()), f"after write_file {rel}")
        before, after = self._state(pre, rel), self._state(self.tree, rel)
        if before != after:
            ledger.append(Change(rel, before, after, index))
        if rel not in self.session.written:
            self.session = replace(self.session, written=(*self.session.written, rel))

    def _bash(
        self, index: int, command: str, destructive: Callable[[], bool], ledger: list[Change]
    ) -> tuple[int, str | None, bool]:
        pre, exact_pre = self.tree, self.exact
        proc = subprocess.run(
            shell_argv(command),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            capture_output=self.capture,
            text=self.capture,
            errors="replace" if self.capture else None,
            check=False,
        )
        output = (proc.stdout or "") + (proc.stderr or "") if self.capture else None
        seen = self._seen()
        assert pre is not None
        if seen is not None:
            if seen:
                self._scoped(seen, "after bash (watcher)")
                ledger.extend(self._diff(pre, self.tree or pre, index if exact_pre else BY_RESTAGE))
            return proc.returncode, output, False
        if destructive() or self._cheap():
            self._full("after bash")
            ledger.extend(self._diff(pre, self.tree or pre, index if exact_pre else BY_RESTAGE))
            return proc.returncode, output, False
        self.exact = False  # its changes go into the next snapshot, unattributed
        log.info("folded", command=command)
        return proc.returncode, output, True

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
        self._stale = True
        return self._run_calls(calls, labels)

    def _run_calls(self, calls: Sequence[Call], labels: Sequence[str] | None) -> Outcome:
        ledger: list[Change] = []
        results: list[CallResult] = []
        before: Digest | None = None
        folded = False
        for index, call in enumerate(calls):
            tool = describe(call)["tool"]
            try:  # links followed to the path really written; .git and NUL refused
                call = prepare_call(self.root, call, self.project.options.exclude_dirs)
            except (OSError, EarshotError) as exc:
                results.append(CallResult(index, tool, False, error=_reason(exc)))
                continue
            if isinstance(call, ReadFile):
                try:
                    text = read_text_file(self.root, call.path).decode("utf-8", "replace")
                    results.append(CallResult(index, tool, True, output=text))
                except (OSError, EarshotError) as exc:
                    results.append(CallResult(index, tool, False, error=_reason(exc)))
                continue
            destructive = self._judge(call)
            rec = self._before_call(call, destructive)
            if before is None:
                before = rec.digest if rec is not None else self._current_snapshot()
            try:
                if isinstance(call, WriteFile):
                    self._write(index, call.path, call.content, ledger)
                    results.append(CallResult(index, tool, True))
                elif isinstance(call, EditFile):
                    text = read_text_file(self.root, call.path).decode("utf-8", "surrogateescape")
                    new = edit(text, call.old, call.new, call.all)
                    self._write(index, call.path, new.encode("utf-8", "surrogateescape"), ledger)
                    results.append(CallResult(index, tool, True))
                else:
                    with noticing_git_changes(self.root) as git:  # not covered by undo: said
                        code, output, was_folded = self._bash(
                            index, call.command, destructive, ledger
                        )
                    folded |= was_folded
                    results.append(
                        CallResult(
                            index, tool, True, output=output, exit_code=code, git=tuple(git.paths)
                        )
                    )
            except (OSError, EarshotError) as exc:
                results.append(CallResult(index, tool, False, error=_reason(exc)))
        after = self._current_snapshot() if before is not None else None
        described = []
        for index, call in enumerate(calls):
            doc = describe(call)
            if labels is not None:
                doc["agent"] = labels[index]
            described.append(doc)
        batch = self._record(BatchKind.CALLS, tuple(described), before, after, ledger, folded)
        return Outcome(batch, tuple(results))

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
        return self._run_calls(calls, labels)

    def _current_snapshot(self) -> Digest | None:
        return self.project.head_snapshot()

    def _record(
        self,
        kind: BatchKind,
        calls: tuple[dict[str, object], ...],
        before: Digest | None,
        after: Digest | None,
        ledger: list[Change],
        folded: bool,
        targets: tuple[int, ...] = (),
    ) -> Batch:
        return record_batch(self.project, self, kind, calls, before, after, ledger, folded, targets)


def merge_ledger(lines: list[Change]) -> list[Change]:
    """One line per path: the first line's before, the last line's after."""
    merged: dict[str, Change] = {}
    for line in lines:
        prior = merged.get(line.path)
        if prior is None:
            merged[line.path] = line
        else:
            by = prior.by if prior.by == line.by else line.by
            merged[line.path] = Change(line.path, prior.before, line.after, by)
    return [c for c in merged.values() if c.before != c.after]


def record_batch(
    project: Project,
    engine: Engine,
    kind: BatchKind,
    calls: tuple[dict[str, object], ...],
    before: Digest | None,
    after: Digest | None,
    ledger: list[Change],
    folded: bool,
    targets: tuple[int, ...] = (),
) -> Batch:
    """Commit a batch with the session record, in one transaction."""
    now = time.time_ns()
    with project.store.backend.write() as txn:
        current = get_session(txn, engine.session.id) or engine.session
        seq = current.next_seq
        batch = Batch(
            session=engine.session.id,
            seq=seq,
            kind=kind,
            time_ns=now,
            calls=calls,
            before=before,
            after=after,
            ledger=tuple(merge_ledger(ledger)),
            folded=folded,
            targets=targets,
        )
        put_batch(txn, batch)
        # A daemon's token, with the tree it vouches for: the next process may
        # then trust the watcher instead of walking the tree (DESIGN.md).
        token = engine._token
        if engine.exact and isinstance(token, str) and engine.tree is not None:
            mark = {"token": token, "tree": engine.tree.hex()}
            txn.put("meta", _WATCH_MARK, json.dumps(mark).encode())
        else:
            txn.delete("meta", _WATCH_MARK)
        log.info(
            "batch", session=batch.session, seq=seq, kind=kind.value, changes=len(batch.ledger)
        )
        written = tuple(dict.fromkeys((*current.written, *engine.session.written)))
        engine.session = SessionRecord(current.id, current.created_ns, now, seq + 1, written)
        put_session(txn, engine.session)
    if engine.on_batch is not None:
        engine.on_batch(batch)
    return batch


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return str(exc)
