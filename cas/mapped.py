"""Files under a root that a live process has mapped shared and writable.

A write through a shared mapping makes no inotify event: not while the
descriptor it was mapped from stays open, nor after that descriptor is
closed (the mapping lives on). Only the file's mtime moves, which a walk
sees and a watcher does not. So a watcher's "unchanged" is believed only
for files nobody can write that way: the ones this module finds (once a
batch, ``policy.Restager.mapped``) are read again whenever the watcher is
asked.

The kernel lists every mapping of a process in ``/proc/PID/maps``; the
ones we can read are this user's processes (another user's process cannot
write into this user's files unless they are shared with it on purpose).
Reading them all costs about 17 microseconds a process (1.3-2 ms for 78
processes measured here; docs/ARCHITECTURE.md, "The watcher vouches only
for what it saw"); the lines are parsed only in the few that name the root.
"""

from __future__ import annotations

import os
from typing import Final

PROC: Final = "/proc"
_DELETED: Final = b" (deleted)"
#: The kernel writes a newline in a mapped file's path as this escape.
_NEWLINE: Final = b"\\012"


def _writable_shared(line: bytes) -> bytes | None:
    """The path of a ``maps`` line mapped shared and writable, else None."""
    fields = line.split(None, 5)
    if len(fields) < 6:
        return None
    perms, path = fields[1], fields[5]
    if perms[1:2] != b"w" or perms[3:4] != b"s" or not path.startswith(b"/"):
        return None
    return path


def shared_writable_mappings(root: str | os.PathLike[str], proc: str = PROC) -> set[str]:
    """Root-relative paths of the files under ``root`` (real, absolute) that a
    readable process maps shared and writable.

    A name the kernel wrote ambiguously (a newline as ``\\012``, a deleted
    file's `` (deleted)``) is listed both ways: reading one more file is
    harmless, missing one is not.
    """
    prefix = os.fsencode(os.fspath(root)).rstrip(b"/") + b"/"
    found: set[str] = set()
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "maps"), "rb") as f:
                data = f.read()
        except OSError:  # gone, or another user's
            continue
        if prefix not in data:  # most processes map nothing under the root
            continue
        for line in data.splitlines():
            path = _writable_shared(line)
            if path is None or not path.startswith(prefix):
                continue
            rel = path[len(prefix) :]
            names = {rel}
            if rel.endswith(_DELETED):  # the name's inode is gone, or the name says so
                names.add(rel[: -len(_DELETED)])
            for name in list(names):
                names.add(name.replace(_NEWLINE, b"\n"))
            found.update(os.fsdecode(name) for name in names)
    return found
