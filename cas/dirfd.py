"""Directory descriptors under a root, opened one component at a time.

Every write, rename and delete of a restore goes through them: each
component is opened with ``O_DIRECTORY|O_NOFOLLOW`` from the root down, so
no operation can pass through a symlink or leave the root, even if the tree
changes meanwhile.
"""

from __future__ import annotations

import errno
import os

from .errors import EarshotError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(EarshotError):
    """A path whose parent on disk is a symlink or not a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: a parent is a symlink or not a directory; not written through")
        self.path = path


#: Levels of directories whose descriptors ``DirHandles`` keeps open.
_KEPT_DEPTH = 32


class DirHandles:
    """Directory descriptors under the root, opened one component at a time."""

    def __init__(self, root: str) -> None:
        self.root_fd = os.open(root, DIR_FLAGS)
        self._open: dict[str, int] = {"": self.root_fd}

    def dir_fd(self, rel_dir: str) -> int:
        """The directory's descriptor, each component opened without following links.

        A loop, not a recursion: a path may hold a thousand components. The
        descriptors of the first ``_KEPT_DEPTH`` levels are kept for the
        next call; deeper ones only while they are walked through, so a deep
        path cannot spend the process's descriptors.
        """
        fd = self._open.get(rel_dir)
        if fd is not None:
            return fd
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
