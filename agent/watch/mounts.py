"""Noticing a file system mounted or unmounted under the watched root.

inotify watches an inode: a directory's watch sees nothing of what is
mounted over it later, and an unmount takes the mounted root's watches with
it. The kernel flags ``/proc/self/mountinfo`` (POLLPRI) whenever this
process's mount table changes; a thread waits for that, compares the mount
points under the root, and tells the watcher which ones came or went.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable

from earshot.cas.mounts import MOUNTINFO, mount_points


def mounts_under(root: str, source: str = MOUNTINFO) -> set[tuple[int, str]]:
    """(mount id, mount point) of the mounts strictly below ``root`` (absolute).

    The id tells a new mount over the same point from the one before it.
    """
    try:
        with open(source, "rb") as f:
            table = mount_points(f.read())
    except OSError:
        return set()
    prefix = root.rstrip("/") + "/"
    return {(mid, point) for mid, point in table if point.startswith(prefix)}


class MountWatch:
    """Calls ``changed(points)`` (root-relative) when mounts below the root come or go."""

    def __init__(
        self,
        root: str,
        changed: Callable[[set[str]], None],
        failed: Callable[[str], None],
    ) -> None:
        self.root = root.rstrip("/") or "/"
        self.changed = changed
        #: Told why the thread stopped watching the mount table: mounts would
        #: then come and go unseen, so the watcher must stop vouching.
        self.failed = failed
        self._stop_r, self._stop_w = os.pipe()
        self._thread: threading.Thread | None = None
        self._armed = threading.Event()
        self.known: set[tuple[int, str]] = set()

    def start(self) -> MountWatch:
        try:
            fd = os.open(MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.failed(f"cannot watch the mount table ({exc.strerror})")
            return self
        self._thread = threading.Thread(
            target=self._run, args=(fd,), name="earshot-mounts", daemon=True
        )
        self._thread.start()
        self._armed.wait(timeout=5)  # from here on, every change wakes the thread
        return self

    def stop(self) -> None:
        os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)

    def _run(self, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        poller.register(self._stop_r, select.POLLIN)
        try:
            os.read(fd, 1 << 20)  # the table is "seen" once read: only later changes wake us
            self.known = mounts_under(self.root)
            self._armed.set()
            while True:
                events = dict(poller.poll())
                if self._stop_r in events:
                    return
                os.lseek(fd, 0, os.SEEK_SET)
                os.read(fd, 1 << 20)
                now = mounts_under(self.root)
                came_or_went = {point for _, point in now ^ self.known}
                self.known = now
                if came_or_went:
                    self.changed({os.path.relpath(p, self.root) for p in came_or_went})
        except Exception as exc:
            self.failed(f"stopped watching the mount table: {exc!r}")
        finally:
            self._armed.set()
            os.close(fd)
