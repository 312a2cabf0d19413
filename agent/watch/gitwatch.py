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

import os
from dataclasses import dataclass, field

from earshot.cas.gitindex import BadIndex, read_index
from earshot.cas.gitrepo import GitRepo

#: What the watcher does about a change in a git dir: the rules of a work
#: tree changed (its top, root-relative), or these root-relative paths
#: changed whether they are tracked; None: nothing to do.
RULES, TRACKED = "rules", "tracked"


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


class GitFiles:
    """The repositories followed, by the directories watched for them."""

    def __init__(self) -> None:
        self.by_top: dict[str, Followed] = {}
        self.by_wd: dict[int, list[tuple[str, Followed]]] = {}

    def add(self, followed: Followed, wd: int, cid: int, name: str) -> None:
        """``wd`` watches the directory holding ``name`` (``index`` or ``exclude``) of it."""
        self.by_wd.setdefault(wd, []).append((name, followed))
        followed.watches.append((wd, cid))

    def forget_wd(self, wd: int) -> list[Followed]:
        """A watched git directory went away: the repositories that used it."""
        return [followed for _, followed in self.by_wd.pop(wd, [])]

    def drop(self, top: str) -> list[tuple[int, int]]:
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

    def event(self, wd: int, name: str) -> list[Followed]:
        """The repositories a change of ``name`` in the directory ``wd`` concerns."""
        return [followed for watched, followed in self.by_wd.get(wd, []) if watched == name]
