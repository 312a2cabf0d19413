"""The snapshot policy: what to restage before each call, and what the engine believes.

- ``read_file``/``edit``'s text transform: nothing.
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
  when that is cheap, else stops vouching (docs/ARCHITECTURE.md, "Checkpoints").

What the engine believes is on disk is one value, a ``Belief``: the tree, whether
every change since it was recorded is known (so a ledger line can name the
call that made it), and the tracker's sync point with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from earshot.agent.core.doomed import unheld_under
from earshot.agent.core.records import WatchMark
from earshot.agent.core.tracker import ChangeTracker, NullTracker
from earshot.agent.core.vouched import vouched_since_mark, with_eventless
from earshot.cas.apply import sync_file_system_at
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.mapped import shared_writable_mappings
from earshot.cas.project import Project, Recorded

log = get_logger("earshot.agent")

DEFAULT_BUDGET_NS = 200_000_000
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


@dataclass(frozen=True, slots=True)
class Belief:
    """What the engine believes is on disk.

    ``tree``: the tree last recorded (None: nothing yet in this process, so
    the first call restages everything or is vouched for). ``exact``: every
    change since it was recorded is known, so what a diff finds can be pinned
    on the call that made it. ``token``: the tracker's sync point with the
    tree (a daemon's token is a string, and only then can a batch leave a
    watch mark).
    """

    tree: Digest | None = None
    exact: bool = False
    token: object = None

    def watch_mark(self) -> WatchMark | None:
        """The mark a batch ending on this belief leaves (None: it vouches for nothing)."""
        if self.exact and isinstance(self.token, str) and self.tree is not None:
            return WatchMark(self.token, self.tree)
        return None


@dataclass(slots=True)
class BatchState:
    """What the policy keeps within one batch."""

    #: When the batch began (before its first restage).
    started_ns: int = 0
    #: Without a watcher, anything may have changed since the last batch.
    stale: bool = False
    #: Whether this batch has restaged every path the session wrote.
    written_fresh: bool = False
    #: Paths this batch's writes name: recorded whatever the ignore rules say.
    forced: set[str] = field(default_factory=set)
    #: Another session's batch was running when this batch began.
    overlap: bool = False
    #: The files live processes map shared and writable, read at the batch's
    #: first ask (``vouched.with_eventless``): once a batch, not once a
    #: restage. A mapping made later is read at the next batch's (or hook
    #: event's) first ask, so a write through it is found then, never lost.
    mapped: set[str] | None = None


class Restager:
    """Keeps the recorded state up to date, as the policy says, and the belief with it."""

    def __init__(
        self, project: Project, session: str, tracker: ChangeTracker | None, budget_ns: int
    ) -> None:
        self.project = project
        self.session = session
        self.tracker = tracker or NullTracker()
        self.watching = not isinstance(self.tracker, NullTracker)
        self.budget_ns = budget_ns
        self.belief = Belief()
        self.batch = BatchState()
        #: The last state a restage recorded (the believed tree's snapshot).
        self.last: Recorded | None = None
        #: Around the last ``before_call``'s restage: the state known exactly
        #: before it and after it (None: not known exactly). What differs
        #: changed between calls (``outside``).
        self.previous: Recorded | None = None
        self.found: Recorded | None = None

    def exactly(self) -> Recorded | None:
        """The last state recorded, if the tree is believed to be exactly it."""
        last = self.last
        if self.belief.exact and last is not None and last.snapshot.tree == self.belief.tree:
            return last
        return None

    def full(self, note: str) -> Recorded:
        log.debug("policy", restage="full", why=note)
        token = self.tracker.token()  # before the walk: a change during it is reported next
        rec = self.project.record(
            None, note=note, session=self.session, listed=False, forced=self.batch.forced
        )
        self.batch.stale = False
        self.belief = Belief(rec.snapshot.tree, exact=True, token=token)
        self.last = rec
        return rec

    def scoped(self, paths: set[str], note: str) -> Recorded:
        """Restage ``paths`` on the believed tree."""
        tree = self.belief.tree
        assert tree is not None
        log.debug("policy", restage="scoped", paths=len(paths), why=note)
        rec = self.project.record(
            sorted(paths),
            base=tree,
            note=note,
            session=self.session,
            listed=False,
            forced=self.batch.forced & paths,
        )
        self.belief = replace(self.belief, tree=rec.snapshot.tree)
        self.last = rec
        return rec

    def seen(self) -> set[str] | None:
        """What the tracker saw since the last sync point; moves the sync point on."""
        seen, token = self.tracker.advance(self.belief.token)
        self.belief = replace(self.belief, token=token)
        return with_eventless(self.project, seen, self.mapped())

    def mapped(self) -> set[str]:
        """The files live processes map shared and writable, once a batch."""
        if self.batch.mapped is None:
            self.batch.mapped = shared_writable_mappings(self.project.root)
        return self.batch.mapped

    def stop_vouching(self) -> None:
        """Changes now on disk are not known: what a restage finds is pinned on no call."""
        self.belief = replace(self.belief, exact=False)

    def adopt(self, tree: Digest) -> None:
        """Believe ``tree`` is on disk (what earshot itself just wrote and recorded)."""
        self.belief = replace(self.belief, tree=tree)

    def cheap(self) -> bool:
        """Whether a full restage costs less than the budget."""
        cost = self.project.full_restage_cost_ns()
        return cost is not None and cost <= self.budget_ns

    def vouched_start(self) -> tuple[bool, Recorded | None]:
        """The first call of a process, when a daemon watched gap-free since the last batch.

        (True, what was restaged) when it vouches; (False, None) when a full
        restage is due.
        """
        if not self.watching:
            return False, None
        vouched = vouched_since_mark(self.project, self.tracker, self.mapped())
        if vouched is None:
            return False, None
        self.belief = Belief(vouched.tree, exact=True, token=vouched.token)
        log.debug("policy", restage="vouched", paths=len(vouched.seen))
        if not vouched.seen:
            return True, None
        return True, self.scoped(vouched.seen, "the watcher vouches since the last batch")

    def before_call(
        self,
        *,
        writes: bool,
        destructive: Callable[[], bool],
        targets: set[str],
        written: tuple[str, ...],
        doomed: Callable[[], list[str]] | None = None,
    ) -> Recorded | None:
        """Bring the recorded state up to date as the policy asks before a call
        (``_before_call``); then, for a command that names paths to delete
        (``doomed``), record what they hold that is not held yet (``doomed``)."""
        self.previous = self.exactly()
        rec = self._before_call(
            writes=writes, destructive=destructive, targets=targets, written=written
        )
        self.found = self.exactly()  # before the targets are lifted: that changes no file
        if writes or doomed is None or self.belief.tree is None:
            return rec
        paths = doomed()
        if not paths:
            return rec
        with self.project.store.reader() as reader:
            unheld = unheld_under(reader, self.belief.tree, paths)
        if not unheld:
            return rec
        log.debug("policy", restage="targets", paths=len(unheld))
        lifted = self.project.record(
            unheld,
            base=self.belief.tree,
            note="a destructive command's targets",
            session=self.session,
            listed=False,
            lifted=unheld,
        )
        self.belief = replace(self.belief, tree=lifted.snapshot.tree)
        self.last = lifted
        return lifted

    def _before_call(
        self,
        *,
        writes: bool,
        destructive: Callable[[], bool],
        targets: set[str],
        written: tuple[str, ...],
    ) -> Recorded | None:
        """Bring the recorded state up to date as the policy asks before a call.

        ``writes``: a write run (write_file and edit calls, or a tool that
        writes only the files it names), else a command, whose changes are
        found by diffing trees. ``targets``: the paths the write run will write.
        What the writes name is recorded whatever the ignore rules say, before
        and after: a write of an ignored ``.env`` can be undone. ``written``:
        every path the session has written.
        """
        batch = self.batch
        batch.forced |= targets
        if self.belief.tree is None:
            vouched, rec = self.vouched_start()
            if vouched:
                if writes and targets:
                    # What a write names is recorded before it whatever the
                    # rules say: the daemon's picture holds an excluded or
                    # over-the-limit path as existence only.
                    return self.scoped(set(targets), "before write_file (vouched)")
                return rec
            batch.written_fresh = True
            return self.full("before the first call of a process")
        seen = self.seen()
        if seen is None and self.watching:
            batch.written_fresh = True
            return self.full("the watcher had a gap")
        if (seen is None or not self.belief.exact) and destructive():
            batch.written_fresh = True
            return self.full("before a destructive command")
        # With a gap-free watcher, restaging what it saw brings every path up to
        # date: the same state a full restage would record, at the cost of the
        # change (so a destructive command gets a scoped restage here too).
        if batch.stale and seen is None and not writes:
            # Without a watcher, anything may have changed since the last batch
            # (the person, another tool). A command's changes are found by
            # diffing whole trees, so re-read it all while that is cheap; else
            # stop vouching, so what a restage finds is not pinned on the call.
            batch.stale = False
            if self.cheap():
                batch.written_fresh = True
                return self.full("a new batch, no watcher")
            self.stop_vouching()
        if writes:
            paths = set(targets)
            if not batch.written_fresh:
                # The person may have changed what the session wrote since its
                # last batch: once per batch, re-read all of it.
                paths |= set(written)
                batch.written_fresh = True
            if seen is not None:
                paths |= seen
            return self.scoped(paths, "before write_file")
        if seen is not None:
            return self.scoped(seen, "before bash (watcher)") if seen else None
        return None

    def after_command(self, *, destructive: Callable[[], bool], signalled: bool) -> bool:
        """Record what a command changed, as the policy asks; False: folded (not recorded).

        With a watcher, what it saw; a destructive command, or one that a
        signal cut off, or any command while a full restage is cheap: a full
        restage. Otherwise its changes are folded into the next snapshot and
        the belief stops vouching.
        """
        seen = self.seen()
        # The shell grammar loads only if the answer still matters (~30 ms).
        if seen is not None or signalled or self.cheap() or destructive():
            # What the command wrote is durable before a record says so: a
            # power cut could keep a file's truncation and lose the bytes
            # written after it, where the batch, seeing the same bytes,
            # records no change and no undo looks. One syncfs per command.
            sync_file_system_at(str(self.project.root))
            if seen is None:
                self.full("after bash")
            elif seen:
                self.scoped(seen, "after bash (watcher)")
            return True
        self.stop_vouching()  # its changes go into the next snapshot, unattributed
        return False

    def after_writes(self, wrote: set[str]) -> None:
        """Record what a run of writes changed (and whatever the watcher saw with it)."""
        # The watcher saw these writes too: move its sync point past them.
        seen = self.seen() if self.watching else None
        self.scoped(wrote | (seen or set()), "after write_file")

    def begin_own_changes(self) -> tuple[Digest | None, set[str]]:
        """Before earshot itself changes files (undo, redo, rewind): what to record
        the state before them on, as (a tree, the paths to read again on it).

        The believed tree, with what the watcher saw since, when the belief is
        exact (adopting the watcher's picture first when it vouches): so the
        batch these changes make can leave a watch mark and the next process
        need not walk the tree. Otherwise (None, nothing): the head, which is
        the newest snapshot of any session and is not vouched for; the
        belief stops vouching then.
        """
        if self.belief.tree is None:
            self.vouched_start()
        if self.belief.exact and self.belief.tree is not None and self.watching:
            seen = self.seen()
            if seen is not None:
                return self.belief.tree, seen
        self.stop_vouching()
        return None, set()

    def end_own_changes(self, tree: Digest) -> None:
        """After earshot itself changed files, recorded as ``tree`` (built on what
        ``begin_own_changes`` gave): fold in what the watcher saw."""
        if not (self.belief.exact and self.watching):
            self.stop_vouching()
            return
        # What earshot wrote is recorded in that tree (a scoped restage of every
        # path it touched); building on it keeps the store's counts for free. Never
        # the head: another session may have recorded it since, on its own picture.
        self.adopt(tree)
        seen = self.seen()
        if seen is None:
            self.stop_vouching()
        elif seen:
            self.scoped(seen, "after earshot's own changes (watcher)")
