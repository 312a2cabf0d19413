"""The watcher: which paths of a root changed since a token, or "don't know".

One inotify instance watches every directory the scan would record (never
``.git``, ignored trees such as ``node_modules``, or earshot's data dir), one
non-recursive watch each, with a mask of the events that mean change (no
IN_OPEN, IN_CLOSE_NOWRITE or IN_ACCESS: reading files queues nothing). Each
changed path gets the next sequence number; a token is the current number.
A directory created or moved in is reported as itself (the engine's scoped
restage scans a named directory whole) and watched with everything below it;
a rename reports both names.

Built on watchdog's inotify layer (``InotifyFD``), not its ``Observer``: the
Observer runs one emitter thread per scheduled watch, its recursive emitter
walks ignored trees, its move grouper holds an unpaired IN_MOVED_FROM for
0.5 s, and its per-emitter queues lose the kernel's order between the root
and the cookie directory. ``InotifyFD`` reads one queue and calls us in
kernel order (from 7.1.1 one thread drains the kernel's queue into an
unbounded one and another calls us, so a slow callback no longer makes the
kernel's overflow); it reports IN_Q_OVERFLOW through ``on_queue_overflow``
(watchdog itself only logs it), then ``on_events_lost``, and raises ENOSPC
from ``add_callback``.

Sync point: ``token``/``changed_since`` create a unique cookie file in
``<data_dir>/cookies`` (watched by the same inotify instance) and wait for
its event; everything queued before it has then been handled.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Collection
from pathlib import Path
from typing import Any

from watchdog.observers.inotify_c import (
    InotifyConstants,
    InotifyEvent,
    InotifyFD,
    WatchDescriptor,
)

from earshot.agent.watch.gitwatch import GitFollower
from earshot.agent.watch.mounts import MountWatch
from earshot.agent.watch.tree import (
    COOKIE_MASK,
    SELF_EVENTS,
    GiveUp,
    WatchedDir,
    WatchTree,
    filesystem_type,
    join,
    max_user_watches,
    own_dirs,
    skipped,
)
from earshot.cas.keep import KeepIgnored
from earshot.cas.logs import get_logger

log = get_logger("earshot.watch")

_C = InotifyConstants
_IGNORE_FILES = frozenset((".gitignore", ".earshotignore"))
#: inotify sees only local changes on these.
NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs"}
    | {"lustre", "gpfs", "davfs", "fuse.sshfs", "fuse.rclone", "fuse.s3fs", "virtiofs"}
)
DEFAULT_SETTLE_TIMEOUT = 5.0
#: Changed paths remembered; older ones are dropped and their tokens expire.
MAX_TRACKED = 200_000


def _percentile(sorted_ns: list[int], pct: int) -> float | None:
    if not sorted_ns:
        return None
    return round(sorted_ns[-(-len(sorted_ns) * pct // 100) - 1] / 1e6, 3)


class Watcher:
    """Watches a root; answers "what changed since token T?" or None (a gap).

    Tokens are increasing integers that start at the wall clock in ns, so a
    token from an earlier watcher is older than any of this one's.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        data_dir: str | os.PathLike[str],
        *,
        exclude_dirs: Collection[str] | None = None,
        settle_timeout: float = DEFAULT_SETTLE_TIMEOUT,
        max_tracked: int = MAX_TRACKED,
        keep: KeepIgnored | None = None,
    ) -> None:
        self.root = os.path.realpath(root)
        self.data_dir = Path(data_dir)
        self.cookie_dir = str(self.data_dir / "cookies")
        self.exclude = frozenset(exclude_dirs or ()) | own_dirs(self.root, self.data_dir)
        self.settle_timeout = settle_timeout
        self.max_tracked = max_tracked
        #: What of the ignored the scans keep: it decides what is watched.
        self.keep = keep or KeepIgnored.from_env()
        self._lock = threading.RLock()
        self._fd: InotifyFD | None = None
        self._tree: WatchTree | None = None
        self._cookie: tuple[int, int] | None = None  # (wd, callback id)
        self._waiters: dict[str, threading.Event] = {}
        self.started_ns = time.time_ns()
        self._seq = self._floor = self.started_ns
        self._last_gap = 0
        self._changed: dict[str, int] = {}  # path -> seq, in seq order
        self._gaps: deque[dict[str, Any]] = deque(maxlen=20)
        self._degraded: str | None = None
        self._said: set[str] = set()
        self._stopping = False
        self._events = self._overflows = 0
        self._settle_ns: deque[int] = deque(maxlen=200)
        self.fstype: str | None = None
        self._mounts: MountWatch | None = None
        #: The repositories whose index and info/exclude are followed (``gitwatch``).
        self._git = GitFollower(self.root, self._note, self._gap)

    # -- life ---------------------------------------------------------------

    def start(self) -> Watcher:
        """Watch every directory the scan would record; returns once they all are."""
        self.fstype = filesystem_type(self.root)
        if self.fstype in NETWORK_FS:
            self._give_up(f"unsupported filesystem ({self.fstype}): inotify misses remote changes")
            return self
        try:
            fd = InotifyFD()
        except OSError as exc:
            self._give_up(f"no inotify instance ({exc.strerror}; fs.inotify.max_user_instances)")
            return self
        fd.start()
        self._fd = fd
        # Before the walk: a mount that comes or goes while it runs is a gap.
        self._mounts = MountWatch(self.root, self._mounts_changed, self._mounts_lost).start()
        with self._lock:
            self._tree = WatchTree(self.root, fd, self, self.exclude, self.keep, self._git.follow)
            self._git.tree = self._tree
            try:
                self._watch_cookies()
                self._git.follow("")
                self._tree.walk(self.root, "", None)
            except GiveUp as stop:
                self._give_up(str(stop))
            except OSError as exc:
                self._give_up(f"cannot watch: {exc}")
        return self

    def stop(self) -> None:
        self._stopping = True
        mounts, self._mounts = self._mounts, None
        if mounts is not None:
            mounts.stop()
        fd, self._fd = self._fd, None
        with self._lock:
            for waiter in self._waiters.values():
                waiter.set()
        if fd is not None:
            fd.stop()
            fd.join(timeout=5)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the tracker interface ----------------------------------------------

    def token(self) -> int:
        """A mark for now, after every event queued before this call."""
        return self.advance(None)[1]

    def changed_since(self, token: object) -> set[str] | None:
        """Root-relative paths changed after ``token``; None when there was a gap."""
        return self.advance(token)[0]

    def advance(self, token: object) -> tuple[set[str] | None, int]:
        """``changed_since(token)`` and a token for the same instant.

        Taking the next token at the sync point that answered, rather than
        later, leaves no window in which a change would be in neither answer.
        """
        ok = self._degraded is not None or self._sync()
        with self._lock:
            now = self._seq
            if not ok:  # events may still be in flight: not even ``now`` is a safe mark
                self._gap("settle", f"events did not settle within {self.settle_timeout:g} s")
                return None, now
            if (
                self._degraded is not None
                or not isinstance(token, int)
                or isinstance(token, bool)
                or not self._floor <= token <= now
                or self._last_gap > token
            ):
                return None, now
            out: set[str] = set()
            for rel, seq in reversed(self._changed.items()):
                if seq <= token:
                    break
                out.add(rel)
            return out, now

    def explain(self, token: object) -> tuple[str, bool]:
        """Why ``changed_since(token)`` is None, and whether that is a watcher problem."""
        with self._lock:
            if self._degraded is not None:
                return self._degraded, True
            if not isinstance(token, int) or isinstance(token, bool) or token > self._seq:
                return "not a token of this watcher", False
            if token < self.started_ns:
                return "the token is older than this watcher", False
            if token < self._floor:
                return "too many changes since the token: the oldest were dropped", False
            for gap in self._gaps:
                if gap["token"] > token:
                    return str(gap["reason"]), True
            return "a gap since the token", True

    def status(self) -> dict[str, Any]:
        """What is watched, the current token, watches against the limit, gaps."""
        with self._lock:
            tree = self._tree
            dirs = len(tree.dirs) if tree else 0
            settle = sorted(self._settle_ns)
            return {
                "root": self.root,
                "token": self._seq,
                "healthy": self._degraded is None and self._fd is not None,
                "degraded": self._degraded,
                "filesystem": self.fstype,
                "watched_dirs": dirs,
                "watches": dirs + (self._cookie is not None) + len(self._git.by_wd),
                "max_user_watches": max_user_watches(),
                "ignored_dirs_skipped": tree.ignored if tree else 0,
                "unreadable_dirs": sorted(tree.unreadable)[:20] if tree else [],
                "changed_paths": len(self._changed),
                "events": self._events,
                "overflows": self._overflows,
                "gaps": list(self._gaps),
                "settle_ms": {
                    "count": len(settle),
                    "median": _percentile(settle, 50),
                    "p95": _percentile(settle, 95),
                },
                "started_ns": self.started_ns,
            }

    # -- inotify callbacks (watchdog's WatchCallback), on the reader thread --

    def on_event(self, event: InotifyEvent) -> None:
        if self._stopping:
            return
        try:
            with self._lock:
                self._handle(event)
        except GiveUp as stop:
            with self._lock:
                self._give_up(str(stop))
        except Exception as exc:  # never kill the reader thread: stop vouching instead
            log.exception("watcher failed", root=self.root)
            with self._lock:
                self._give_up(f"internal error: {exc!r}")

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        with self._lock:
            if self._cookie is not None and wd == self._cookie[0]:
                self._cookie = None  # the data dir went away; re-watched at the next sync
                return
            if wd in self._git.by_wd:
                for followed in self._git.forget_wd(wd):
                    self._git.unfollow(followed.at)
                self._gap("rules", "a repository's git directory went away")
                return
            gone = self._tree.forget(wd) if self._tree else None
            if gone is not None and gone.rel == "" and not self._stopping:
                self._give_up("the root was deleted or unmounted")

    def on_queue_overflow(self) -> None:
        with self._lock:
            self._overflows += 1
            self._gap("overflow", "inotify queue overflowed: events were lost")
            if self._degraded is not None or self._stopping or self._tree is None:
                return
            try:
                # Directories made while events were lost have no watch yet.
                self._tree.walk(self.root, "", None)
            except GiveUp as stop:
                self._give_up(str(stop))
            # Tokens handed out while re-watching are not trusted either.
            self._gap("overflow", "inotify queue overflowed: events were lost")

    def on_events_lost(self) -> None:
        """watchdog 7.1.1 calls this once every callback's ``on_queue_overflow``
        has returned; the overflow was handled there (a gap, the tree walked
        again), so there is nothing more to do."""

    # -- internals (under self._lock) ---------------------------------------

    def _handle(self, event: InotifyEvent) -> None:
        mask, wd = event.mask, event.wd
        if self._cookie is not None and wd == self._cookie[0]:
            waiter = self._waiters.get(os.fsdecode(event.name))
            if waiter is not None:
                waiter.set()
            return
        if wd in self._git.by_wd:
            self._git.changed(wd, os.fsdecode(event.name))
            return
        self._events += 1
        if mask & _C.IN_UNMOUNT:
            self._gap("unmount", "a filesystem under the root was unmounted")
            return
        tree = self._tree
        here = tree.dirs.get(wd) if tree else None
        if tree is None or here is None:
            return
        if not event.name:
            if here.rel == "" and mask & SELF_EVENTS:
                self._give_up("the root was moved or deleted")
            return  # the parent's watch reports a subdirectory's own changes
        name = os.fsdecode(event.name)
        if here.top_only:
            # A directory the scan keeps as existence only changed its listing:
            # judged again (kept now?), and re-read by the next restage.
            tree.rewalk(here.rel)
            self._note(here.rel)
            return
        rel = join(here.rel, name)
        is_dir = bool(mask & _C.IN_ISDIR)
        if skipped(name):
            return
        # An ignored name is reported too: the scan records that it exists,
        # and keeps its content when it is small (cas/keep.py).
        if is_dir:
            path = os.path.join(self.root, rel)
            if path in self.exclude:
                return
            if mask & (_C.IN_MOVED_FROM | _C.IN_DELETE):
                tree.unwatch(rel)
                self._git.unfollow(rel)
            elif mask & (_C.IN_CREATE | _C.IN_MOVED_TO) or rel not in tree.by_rel:
                tree.walk(path, rel, here.rules, relist=False)
        self._note(rel)
        if name in _IGNORE_FILES:
            self._rules_changed(tree, here)

    def _mounts_changed(self, points: set[str]) -> None:
        """Mounts came or went below the root (on the mount thread).

        What is on disk there changed without an event: a gap, and the
        points are watched afresh (the new file system's root, or the
        directory an unmount uncovered).
        """
        try:
            self._remount(points)
        except Exception as exc:  # never leave a wrong view vouched for: stop vouching
            log.exception("watcher failed on a mount change", root=self.root)
            with self._lock:
                self._give_up(f"internal error on a mount change: {exc!r}")

    def _mounts_lost(self, reason: str) -> None:
        if not self._stopping:
            with self._lock:
                self._give_up(reason)

    def _remount(self, points: set[str]) -> None:
        with self._lock:
            if self._stopping or self._degraded is not None or self._tree is None:
                return
            first = sorted(points)[0]
            self._gap("mount", f"a file system was mounted or unmounted at {first}")
            tree = self._tree
            for rel in sorted(points):
                parent = rel.rpartition("/")[0]
                if parent and parent not in tree.by_rel:
                    continue  # below what is watched (ignored, excluded): nothing to re-watch
                tree.unwatch(rel)
                try:
                    if os.path.isdir(os.path.join(self.root, rel)):
                        tree.rewalk(rel)
                except GiveUp as stop:
                    self._give_up(str(stop))
                    return
                except OSError:
                    continue  # gone again; the gap already says it
                self._note(rel)

    def _rules_changed(self, tree: WatchTree, here: WatchedDir) -> None:
        """An ignore file changed: re-decide what is watched below its directory."""
        if here.rel == "":
            self._gap("rules", "ignore rules changed at the root")
        tree.rewalk(here.rel)
        if here.rel:
            self._note(here.rel)  # scanned whole, under the new rules

    def _note(self, rel: str) -> None:
        self._seq += 1
        changed = self._changed
        changed.pop(rel, None)
        changed[rel] = self._seq
        if len(changed) > self.max_tracked:
            self._floor = changed.pop(next(iter(changed)))

    def _gap(self, key: str, reason: str) -> None:
        self._seq += 1
        self._last_gap = self._seq
        self._gaps.append({"token": self._seq, "reason": reason, "time_ns": time.time_ns()})
        self._say(key, reason)

    def _give_up(self, reason: str) -> None:
        """Stop vouching for good: release the watches (others need them), answer None."""
        if self._degraded is None:
            self._degraded = reason
            self._gap("give-up", f"{reason}; falling back to full restages")
        if self._tree is not None:
            self._tree.unwatch("")

    def _say(self, key: str, reason: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.warning("watcher gap", root=self.root, reason=reason)

    def _watch_cookies(self) -> None:
        assert self._tree is not None
        os.makedirs(self.cookie_dir, exist_ok=True)
        self._cookie = self._tree.add_watch(self.cookie_dir, COOKIE_MASK)

    def _sync(self) -> bool:
        """Wait until every event queued before now has been handled."""
        fd = self._fd
        if fd is None or not fd.is_alive():
            return False
        name = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(6)}"
        waiter = threading.Event()
        path = os.path.join(self.cookie_dir, name)
        start = time.perf_counter_ns()
        with self._lock:
            self._waiters[name] = waiter
        try:
            self._make_cookie(path)
            ok = waiter.wait(self.settle_timeout) and not self._stopping
        except OSError:
            ok = False
        finally:
            with self._lock:
                self._waiters.pop(name, None)
            with contextlib.suppress(OSError):
                os.unlink(path)
        if ok:
            self._settle_ns.append(time.perf_counter_ns() - start)
        return ok

    def _make_cookie(self, path: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        with self._lock:
            if self._cookie is None:
                self._watch_cookies()
        try:
            os.close(os.open(path, flags, 0o600))
        except FileNotFoundError:  # the data dir was removed: make it and watch it again
            with self._lock:
                self._watch_cookies()
            os.close(os.open(path, flags, 0o600))
