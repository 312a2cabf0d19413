"""Directory descriptors under a root, opened one component at a time.

Every write, rename and delete of a restore goes through them: each
component is opened with ``O_DIRECTORY|O_NOFOLLOW`` from the root down, so
no operation can pass through a symlink or leave the root, even if the tree
changes meanwhile.
"""

from __future__ import annotations

import errno
import os
import resource
from collections import OrderedDict

from .errors import EarshotError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(EarshotError):
    """A path whose parent on disk is a symlink or not a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: a parent is a symlink or not a directory; not written through")
        self.path = path


#: Levels of directories whose descriptors ``DirHandles`` keeps open.
_KEPT_DEPTH = 32
#: Descriptors kept open at most: a restore of a tree of 20,000 directories
#: (a clone, a restore into an empty root) must not spend the process's
#: limit (often 1,024) and fail with EMFILE. Past it, the least recently
#: used are closed, at the start of a call, down to half. A quarter of the
#: process's limit, between 16 and 256: the rest is for the files written.
_KEPT_MAX = max(16, min(256, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4))


class DirHandles:
    """Directory descriptors under the root, opened one component at a time.

    A descriptor handed out stays valid until the second next call: callers
    use it at once (two at most, for a rename), never keep it.
    """

    def __init__(self, root: str) -> None:
        self.root_fd = os.open(root, DIR_FLAGS)
        self._open: OrderedDict[str, int] = OrderedDict({"": self.root_fd})

    def dir_fd(self, rel_dir: str) -> int:
        """The directory's descriptor, each component opened without following links.

        A loop, not a recursion: a path may hold a thousand components. The
        descriptors of the first ``_KEPT_DEPTH`` levels are kept for the
        next call; deeper ones only while they are walked through, so a deep
        path cannot spend the process's descriptors.
        """
        fd = self._open.get(rel_dir)
        if fd is not None:
            self._open.move_to_end(rel_dir)
            return fd
        if len(self._open) > _KEPT_MAX:
            self._shed()
        parts = rel_dir.split("/")
        known = len(parts) - 1
        while known > 0 and "/".join(parts[:known]) not in self._open:
            known -= 1
        fd = self._open["/".join(parts[:known])] if known else self.root_fd
        passing: list[int] = []
        try:
            for depth in range(known, len(parts)):
                try:
                    fd = os.open(os.fsencode(parts[depth]), DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafePath(rel_dir) from None
                    raise
                if depth < _KEPT_DEPTH or depth == len(parts) - 1:
                    self._open["/".join(parts[: depth + 1])] = fd
                else:
                    passing.append(fd)
        finally:
            for transient in passing:
                os.close(transient)
        return fd

    def _shed(self) -> None:
        """Close the least recently used descriptors, down to half the bound.
        The root's stays; the one handed out last is the most recent."""
        while len(self._open) > _KEPT_MAX // 2:
            key, fd = next(iter(self._open.items()))
            if key == "":
                self._open.move_to_end(key)
                continue
            del self._open[key]
            os.close(fd)

    def parent(self, rel: str) -> tuple[int, bytes]:
        """(descriptor of the directory holding ``rel``, its last component)."""
        parent, _, name = rel.rpartition("/")
        return self.dir_fd(parent), os.fsencode(name)

    def forget(self, rel_dir: str) -> None:
        """Close descriptors of a removed directory and everything under it."""
        for key in [k for k in self._open if k == rel_dir or k.startswith(rel_dir + "/")]:
            if key:
                os.close(self._open.pop(key))

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
