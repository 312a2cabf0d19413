"""Which directories the watcher watches: those the scan would walk, one watch each.

Never ``.git`` (at any depth) or earshot's own data dir when it lies inside
the root. An ignored directory is watched when the scan walks it: kept within
the budget for ignored content, or sparse for the paths git's index tracks
in it (``cas.keep.subdir_rules``, the same decision as ``cas.scan``, with the
same ``IgnoreRules`` chain). One the scan keeps as existence only is not
walked; when that verdict could change with what it holds (over the budget,
or a cache by a marker file), its own listing gets a watch (*top only*): an
event there re-judges it. Each directory gets a non-recursive inotify watch
through watchdog's ``InotifyFD``.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.observers.inotify_c import (
    CallbackId,
    InotifyConstants,
    InotifyFD,
    Mask,
    WatchCallback,
    WatchDescriptor,
)

from earshot.cas.ignore import IgnoreRules
from earshot.cas.keep import KeepIgnored, subdir_rules
from earshot.cas.recording import is_temp_name

_C = InotifyConstants
_CHANGE = _C.IN_MODIFY | _C.IN_ATTRIB | _C.IN_MOVE | _C.IN_CREATE | _C.IN_DELETE | _C.IN_CLOSE_WRITE
SELF_EVENTS = _C.IN_DELETE_SELF | _C.IN_MOVE_SELF
_FLAGS = _C.IN_DONT_FOLLOW | _C.IN_ONLYDIR
#: What means change. IN_CLOSE_WRITE too: a write through a shared mmap gives
#: no IN_MODIFY, but closing the descriptor it was mapped from, opened for
#: writing, gives that. Left out: IN_OPEN, IN_CLOSE_NOWRITE and IN_ACCESS
#: (reads would flood the queue).
TREE_MASK = Mask(_CHANGE | SELF_EVENTS | _FLAGS | _C.IN_EXCL_UNLINK)
COOKIE_MASK = Mask(_C.IN_CREATE | _FLAGS)
#: A directory recorded as one entry: only a change of its own listing (its
#: mtime, its identity) counts; a file written inside it does not.
TOP_MASK = Mask(_C.IN_MOVE | _C.IN_CREATE | _C.IN_DELETE | SELF_EVENTS | _FLAGS | _C.IN_EXCL_UNLINK)
#: A git dir or its info dir: a file replaced (git writes a lock file and
#: renames it), written in place, or removed. Not IN_MODIFY: the lock file is
#: written in many pieces, and only its rename counts.
GIT_MASK = Mask(
    _C.IN_CLOSE_WRITE
    | _C.IN_MOVED_TO
    | _C.IN_CREATE
    | _C.IN_DELETE
    | _C.IN_MOVED_FROM
    | SELF_EVENTS
    | _FLAGS
)
_OCTAL = re.compile(r"\\([0-7]{3})")


def max_user_watches() -> int | None:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def filesystem_type(path: str) -> str | None:
    """The type of the filesystem holding ``path``, from /proc/self/mountinfo."""
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                mount = _OCTAL.sub(lambda m: chr(int(m[1], 8)), fields[4])
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, fields[fields.index("-") + 1]
    except (OSError, ValueError, IndexError):
        return None
    return kind


def own_dirs(root: str, data_dir: Path) -> frozenset[str]:
    """earshot's own directories under the root (as ``Project`` excludes them from scans)."""
    out = {os.path.realpath(data_dir)}
    if data_dir.parent.name == "checkpoints":
        home = os.path.realpath(data_dir.parent.parent)
        if home == root:
            out |= {os.path.join(home, "checkpoints"), os.path.join(home, "sessions")}
        elif home.startswith(root + os.sep):
            out.add(home)
    return frozenset(out)


def join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def skipped(name: str) -> bool:
    """Names the scan never records, whatever the rules say."""
    return name == ".git" or is_temp_name(name)


class GiveUp(Exception):
    """The tree cannot be watched whole any more (the watch limit, the root gone)."""


@dataclass(slots=True)
class WatchedDir:
    rel: str
    rules: IgnoreRules  # the rules that apply to this directory's entries
    cid: int  # our callback id on its watch
    #: Kept as existence only by the scan: watched for its own listing alone,
    #: whose change may change that verdict (``WatchTree.walk`` judges it again).
    top_only: bool = False


class WatchTree:
    """The watched directories of one root, by watch descriptor and by path."""

    def __init__(
        self,
        root: str,
        fd: InotifyFD,
        callback: WatchCallback,
        exclude: frozenset[str],
        keep: KeepIgnored | None = None,
        on_repository: Callable[[str], None] | None = None,
    ) -> None:
        self.root = root
        self.fd = fd
        self.callback = callback
        self.exclude = exclude
        self.keep = keep or KeepIgnored()
        #: Told of each repository nested in the root (a watched directory holding .git).
        self.on_repository = on_repository
        self.ids = itertools.count(1)
        self.dirs: dict[int, WatchedDir] = {}
        self.by_rel: dict[str, int] = {}
        self.unreadable: set[str] = set()
        self.ignored = 0

    def add_watch(self, path: str, mask: Mask) -> tuple[int, int]:
        """A watch with our callback on it: (wd, callback id)."""
        cid = next(self.ids)
        wd = self.fd.add_callback(os.fsencode(path), mask, self.callback, CallbackId(cid))
        return int(wd), cid

    def watch(
        self, path: str, rel: str, rules: IgnoreRules, top_only: bool = False
    ) -> tuple[int, bool] | None:
        """Watch one directory: (wd, whether it is new), or None if it cannot be."""
        try:
            wd, cid = self.add_watch(path, TOP_MASK if top_only else TREE_MASK)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise GiveUp(
                    f"inotify watch limit reached (fs.inotify.max_user_watches = "
                    f"{max_user_watches()}) after {len(self.dirs)} directories"
                ) from None
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.unreadable.add(rel)
            return None
        if wd < 0:  # watchdog swallows EACCES and hands back wd -1
            self.fd.remove_callbacks([(WatchDescriptor(wd), CallbackId(cid))])
            self.unreadable.add(rel)
            return None
        old = self.dirs.get(wd)
        if old is not None:  # the kernel says: this directory is watched already
            self.fd.remove_callbacks([(WatchDescriptor(wd), CallbackId(cid))])
            if old.rel == rel and old.top_only == top_only:
                return wd, False
            self.unwatch(old.rel)  # it moved without our seeing it, or is walked now
            return self.watch(path, rel, rules, top_only)
        if rel in self.by_rel:
            self.unwatch(rel)  # a stale entry: another directory was here
        self.dirs[wd] = WatchedDir(rel, rules, cid, top_only)
        self.by_rel[rel] = wd
        self.unreadable.discard(rel)
        return wd, True

    def walk(self, path: str, rel: str, parent: IgnoreRules | None, relist: bool = True) -> None:
        """Watch ``path`` and every directory below it that the scan would walk.

        ``parent``: the rules of the directory holding ``path`` (None: ``path``
        is the root). Without ``relist``, a directory watched already is not
        listed again: whatever appeared in it since has its own event.
        """
        stack: list[tuple[str, str, IgnoreRules | None]]
        if parent is None:
            stack = [(path, rel, None)]
        else:
            inner = self._judge(path, rel, parent)
            if inner is None:
                return
            stack = [(path, rel, inner)]
        while stack:
            path, rel, parent = stack.pop()
            rules = IgnoreRules.for_root(self.root, live=True) if parent is None else parent
            # Watch before listing: what appears in between is both listed and reported.
            watched = self.watch(path, rel, rules)
            if watched is None:
                if not rel:
                    raise GiveUp(f"cannot watch the root {self.root}")
                continue
            wd, new = watched
            if not (new or relist):
                continue
            try:
                with os.scandir(path) as listing:
                    entries = list(listing)
            except OSError:
                self.unreadable.add(rel)
                continue
            names = [e.name for e in entries]
            if parent is not None:
                rules = parent.descend(rel, path, names)
            self.dirs[wd].rules = rules
            if rel and ".git" in names and self.on_repository is not None:
                self.on_repository(rel)
            for entry in entries:
                try:
                    if skipped(entry.name) or not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                sub = join(rel, entry.name)
                inner = self._judge(entry.path, sub, rules)
                if inner is not None:
                    stack.append((entry.path, sub, inner))

    def _judge(self, path: str, rel: str, rules: IgnoreRules) -> IgnoreRules | None:
        """The rules to walk a subdirectory with, or None when the scan does not walk it
        (then it is watched for its own listing alone if that can change the verdict)."""
        if path in self.exclude:
            self.ignored += 1
            if rel in self.by_rel:
                self.unwatch(rel)
            return None
        inner = subdir_rules(rules, rel, path, self.keep)
        if inner is not None:
            return inner
        self.ignored += 1
        if rel in self.by_rel and not self.dirs[self.by_rel[rel]].top_only:
            self.unwatch(rel)  # not walked since it was watched
        # Its own listing is watched: the scan records its identity (inode,
        # mtime), which a change there changes, and a marker file's coming or
        # going may change the verdict.
        self.watch(path, rel, rules, top_only=True)
        return None

    def rewalk(self, rel: str) -> None:
        """Re-decide a watched directory and what is below it (its rules changed)."""
        if not rel:
            self.walk(self.root, "", None)
            return
        parent_wd = self.by_rel.get(rel.rpartition("/")[0])
        parent = (
            self.dirs[parent_wd].rules
            if parent_wd is not None
            else IgnoreRules.for_path(self.root, rel)
        )
        self.walk(os.path.join(self.root, rel), rel, parent)

    def unwatch(self, rel: str) -> None:
        """Stop watching ``rel`` and everything below it ("": everything)."""
        prefix = f"{rel}/"
        wds = [w for r, w in self.by_rel.items() if not rel or r == rel or r.startswith(prefix)]
        self.fd.remove_callbacks(
            [(WatchDescriptor(w), CallbackId(self.dirs[w].cid)) for w in wds if w in self.dirs]
        )
        for w in wds:
            self.forget(w)

    def forget(self, wd: int) -> WatchedDir | None:
        """Drop our record of a watch (the kernel removed it, or we did)."""
        gone = self.dirs.pop(wd, None)
        if gone is not None and self.by_rel.get(gone.rel) == wd:
            del self.by_rel[gone.rel]
        return gone
