"""What the watcher follows of git's own files: each repository's index and exclude file.

``.git`` is never watched as part of the tree, but two files in it shape
what a scan records: ``info/exclude`` (ignore rules for the whole work tree)
and the index (a tracked path is recorded whatever the rules say, and an
ignored directory holding one is walked for it). Neither has an event in
the tree when it changes. So for the repository holding the root, and for
every repository nested in it, the watcher puts one watch on the directory
holding the index (the git dir) and one on the directory holding the
exclude file, and:

- when ``info/exclude`` changes, the rules of that work tree changed: what
  is watched below its top is decided again, and its top is re-read whole
  (for the root's own repository, a gap, as for the root's ``.gitignore``);
- when the index is replaced (git writes ``index.lock`` and renames it), it
  is read again and compared with what it tracked before: each path that
  became tracked or stopped being tracked is reported, so the next restage
  judges it again. ``git status`` rewrites the index with the same paths:
  nothing is reported then.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from watchdog.observers.inotify_c import CallbackId, WatchDescriptor

from earshot.agent.watch.tree import GIT_MASK, WatchTree
from earshot.cas.gitindex import BadIndex, read_index
from earshot.cas.gitrepo import GitRepo, enclosing_repo, repo_at
from earshot.cas.ignore import NOT_IGNORED


@dataclass(slots=True)
class Followed:
    """One repository the watcher follows: where its work tree's top lies in the root
    (``at``: "" for the root's; ``inside``: where the root lies in it) and the
    paths its index tracked when last read."""

    repo: GitRepo
    at: str
    inside: str = ""
    tracked: frozenset[bytes] | None = None
    #: (watch descriptor, callback id) of the watches put for it.
    watches: list[tuple[int, int]] = field(default_factory=list)

    def read(self) -> frozenset[bytes] | None:
        """The paths the index tracks now (None: no index, or not one git could read)."""
        try:
            return frozenset(read_index(self.repo.index_path, self.repo.digest_size()).paths)
        except FileNotFoundError:
            return frozenset()
        except (OSError, BadIndex):
            return None

    def changed(self) -> list[str] | None:
        """Root-relative paths whose being tracked changed since the last read
        (None: the index cannot be read, so nothing can be told)."""
        now = self.read()
        before, self.tracked = self.tracked, now
        if now is None or before is None:
            return None
        out: list[str] = []
        prefix = os.fsencode(f"{self.inside}/") if self.inside else b""
        for path in sorted(now ^ before):
            if prefix:
                if not path.startswith(prefix):
                    continue  # tracked outside the root: not the root's
                path = path[len(prefix) :]
            rel = os.fsdecode(path)
            out.append(f"{self.at}/{rel}" if self.at else rel)
        return out


class GitFollower:
    """The repositories followed, by the directories watched for them, and what a
    change there means to the watch tree (under the watcher's lock)."""

    def __init__(
        self, root: str, note: Callable[[str], None], gap: Callable[[str, str], None]
    ) -> None:
        self.root = root
        self.note = note
        self.gap = gap
        self.tree: WatchTree | None = None
        self.by_top: dict[str, Followed] = {}
        self.by_wd: dict[int, list[tuple[str, Followed]]] = {}

    def follow(self, rel: str) -> None:
        """Follow the index and ``info/exclude`` of the repository whose top is ``rel``
        ("": the one holding the root, which may lie above it)."""
        tree = self.tree
        if tree is None or rel in self.by_top:
            return
        top = os.path.join(self.root, rel) if rel else self.root
        repo = repo_at(top) if rel else enclosing_repo(self.root)
        if repo is None:
            return
        inside = "" if rel or repo.top == self.root else os.path.relpath(self.root, repo.top)
        followed = Followed(repo, rel, inside)
        followed.tracked = followed.read()
        self.by_top[rel] = followed
        for directory, name in (
            (os.path.dirname(repo.index_path), "index"),
            (os.path.dirname(repo.exclude_path), "exclude"),
        ):
            if name == "exclude" and inside:
                continue  # its patterns are anchored above the root: never read
            with contextlib.suppress(OSError):
                wd, cid = tree.add_watch(directory, GIT_MASK)
                if wd >= 0:
                    self.by_wd.setdefault(wd, []).append((name, followed))
                    followed.watches.append((wd, cid))

    def unfollow(self, rel: str) -> None:
        """A directory went away: the repositories at or below it are not followed."""
        freed = self._drop(rel)
        if freed and self.tree is not None:
            with contextlib.suppress(OSError, KeyError):
                self.tree.fd.remove_callbacks(
                    [(WatchDescriptor(wd), CallbackId(cid)) for wd, cid in freed]
                )

    def forget_wd(self, wd: int) -> list[Followed]:
        """A watched git directory went away: the repositories that used it."""
        return [followed for _, followed in self.by_wd.pop(wd, [])]

    def changed(self, wd: int, name: str) -> None:
        """A file changed in a followed repository's git dir or info dir."""
        tree = self.tree
        if tree is None:
            return
        kind = "exclude" if name == "exclude" else "index"
        for followed in [f for watched, f in self.by_wd.get(wd, []) if watched == kind]:
            if name == "exclude":
                if followed.at == "":
                    self.gap("rules", "the repository's info/exclude changed")
                    tree.rewalk("")
                else:
                    tree.rewalk(followed.at)
                    self.note(followed.at)  # scanned whole, under its new rules
            elif name == "index":
                paths = followed.changed()
                if paths is None:
                    self.gap("index", f"the git index of {followed.repo.top} cannot be read")
                    continue
                for path in paths:
                    self._tracked_changed(tree, path)

    def _tracked_changed(self, tree: WatchTree, rel: str) -> None:
        """``rel`` became tracked or stopped being: what is watched around it is
        decided again (an ignored directory is walked for what git tracks in it),
        and the next restage judges it again."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            ancestor = "/".join(parts[:depth])
            holder = tree.by_rel.get("/".join(parts[: depth - 1]))
            # Only an ignored directory's watch depends on the index: the
            # shallowest one on the way (or one not watched at all) is judged again.
            if holder is None or tree.dirs[holder].top_only:
                tree.rewalk("/".join(parts[: depth - 1]))
                break
            if tree.dirs[holder].rules.verdict(ancestor, True) != NOT_IGNORED:
                tree.rewalk(ancestor)
                break
        self.note(rel)

    def _drop(self, top: str) -> list[tuple[int, int]]:
        """Stop following the repository at ``top`` (and nested ones below it); the
        watches (descriptor, callback id) put for them, to remove."""
        gone = [t for t in self.by_top if t == top or (top and t.startswith(f"{top}/"))]
        freed: list[tuple[int, int]] = []
        for t in gone:
            followed = self.by_top.pop(t)
            for wd, cid in followed.watches:
                users = [u for u in self.by_wd.get(wd, []) if u[1] is not followed]
                if users:
                    self.by_wd[wd] = users
                else:
                    self.by_wd.pop(wd, None)
                freed.append((wd, cid))
        return freed
