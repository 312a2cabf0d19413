"""Recording the root as it is now from what the watch daemon saw, not by a walk.

A batch that ends on an exact belief leaves a *watch mark* (the daemon's
token and the tree it vouched for). While the daemon has watched gap-free
since that token and the head is still that tree, the tree on disk is the
mark's tree plus the paths the daemon reports: a scoped restage of them
records exactly what a full walk would, at the cost of the change.

``earshot snapshot`` and ``earshot restore`` record the current state this
way when a daemon runs, and leave a mark after themselves, so the next call
is vouched for too. Anything that does not add up (no mark, another head, a
gap, no daemon) is a full walk, as without a daemon.
"""

from __future__ import annotations

from dataclasses import dataclass

from earshot.agent.core.records import WatchMark, all_sessions, load_watch_mark, put_watch_mark
from earshot.agent.core.tracker import ChangeTracker
from earshot.cas.digest import Digest
from earshot.cas.logs import get_logger
from earshot.cas.mapped import shared_writable_mappings
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project, Recorded

log = get_logger("earshot.agent")


#: Past this many hard-linked files, asking the watcher is not worth it.
MAX_LINKED = 2000


def with_eventless(
    project: Project, seen: set[str] | None, mapped: set[str] | None = None
) -> set[str] | None:
    """What the watcher saw, plus the recorded files a change of makes no event.

    inotify reports a write on the directory it went through: a write
    through a hard link outside the root (or in a directory nothing
    watches) changes a recorded file with no event where it is recorded.
    A write through a shared mapping makes no event at all: ``mapped``, the
    files live processes map shared and writable (``cas/mapped.py``; read
    now when not given). Those files are read again whenever the watcher is
    asked; None (a gap) when there are too many hard-linked ones, or no full
    scan has counted them yet.
    """
    if seen is None:
        return None
    linked = project.linked_paths()
    if linked is None or len(linked) > MAX_LINKED:
        return None
    if mapped is None:
        mapped = shared_writable_mappings(project.root)
    return seen | set(linked) | mapped


@dataclass(frozen=True, slots=True)
class Vouched:
    """What the daemon vouches for: the mark's tree, and the paths changed since."""

    tree: Digest
    seen: set[str]
    #: The sync point of that answer: the token a mark left after it holds.
    token: str


def vouched_since_mark(
    project: Project, tracker: ChangeTracker, mapped: set[str] | None = None
) -> Vouched | None:
    """What changed since the watch mark, when the daemon vouches for it; else None.
    ``mapped``: as ``with_eventless`` takes it."""
    with project.store.backend.read() as view:
        mark = load_watch_mark(view)
    head = project.head_snapshot()
    if mark is None or head is None or project.read_snapshot(head).tree != mark.tree:
        return None
    seen, token = tracker.advance(mark.token)
    seen = with_eventless(project, seen, mapped)
    if seen is None or not isinstance(token, str):
        return None
    return Vouched(mark.tree, seen, token)


def record_now(
    project: Project,
    tracker: ChangeTracker | None,
    note: str,
    *,
    listed: bool = True,
    progress: Progress = QUIET,
) -> tuple[Recorded, bool]:
    """Record the root as it is now; (what was recorded, whether the daemon vouched).

    Vouched: a scoped restage of what changed since the mark. Otherwise a
    full walk, which leaves a mark at the token taken before it when a
    daemon answers (a change during the walk is reported after that token).
    """
    if tracker is not None:
        vouched = vouched_since_mark(project, tracker)
        if vouched is not None:
            log.debug("policy", restage="vouched", paths=len(vouched.seen), why=note)
            # A batch records what an agent wrote whatever the ignore rules say
            # (an ignored .env), and the watcher does not watch it since. A
            # snapshot holds what a walk would: those paths are judged again.
            with project.store.backend.read() as view:
                written = {p for record in all_sessions(view) for p in record.written}
            paths = sorted(vouched.seen | written)
            rec = project.record(
                paths, base=vouched.tree, note=note, listed=listed, progress=progress
            )
            leave_mark(project, vouched.token, rec.snapshot.tree)
            return rec, True
    token = tracker.token() if tracker is not None else None
    rec = project.record(None, note=note, listed=listed, progress=progress)
    if isinstance(token, str):
        leave_mark(project, token, rec.snapshot.tree)
    return rec, False


def mark_after(project: Project, tracker: ChangeTracker | None) -> None:
    """After earshot itself changed the tree (a restore), vouch again from the mark.

    ``record_now`` left a mark before the change; what changed since it
    (earshot's own writes and anything else) is restaged on the head, and the
    mark moves there. A gap drops the mark: the next call walks the tree.
    """
    if tracker is None:
        return
    with project.store.backend.read() as view:
        mark = load_watch_mark(view)
    head = project.head_snapshot()
    if mark is None or head is None:
        return
    seen, token = tracker.advance(mark.token)
    seen = with_eventless(project, seen)
    if seen is None or not isinstance(token, str):
        leave_mark(project, None, None)
        return
    base = project.read_snapshot(head).tree
    rec = project.record(sorted(seen), base=base, note="what the watcher saw", listed=False)
    leave_mark(project, token, rec.snapshot.tree)


def leave_mark(project: Project, token: str | None, tree: Digest | None) -> None:
    """Set the watch mark to (``token``, ``tree``), or drop it (None)."""
    mark = WatchMark(token, tree) if token is not None and tree is not None else None
    with project.store.backend.write() as txn:
        put_watch_mark(txn, mark)
