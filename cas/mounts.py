"""Special file systems: the mounts a scan never walks (/proc, /sys, /dev/pts, ...).

Their files are made up by the kernel on each read: sizes that lie (0 or
4096 bytes for any content), reads that fail with EIO or block, and
millions of entries. A directory is a mount point when its ``st_dev``
differs from its parent's; only then is ``/proc/self/mountinfo`` read (once
per scanner) to learn the file system type, so an ordinary walk pays one
integer comparison per directory.
"""

from __future__ import annotations

import os
import re
from typing import Final

#: Kernel-made file systems: nothing on them is a user's file. tmpfs and
#: ramfs hold real files and are recorded; so is any disk or network mount.
SPECIAL_TYPES: Final = frozenset(
    {
        "autofs",
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "devtmpfs",
        "efivarfs",
        "fusectl",
        "hugetlbfs",
        "mqueue",
        "nfsd",
        "nsfs",
        "proc",
        "pstore",
        "rpc_pipefs",
        "securityfs",
        "selinuxfs",
        "sysfs",
        "tracefs",
    }
)
MOUNTINFO: Final = "/proc/self/mountinfo"

# mountinfo writes a space, tab, newline or backslash in a path as \ooo.
_OCTAL: Final = re.compile(rb"\\([0-7]{3})")


def _unescape(field: bytes) -> str:
    return os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m[1], 8)]), field))


def parse_mountinfo(data: bytes) -> dict[str, str]:
    """Mount point -> file system type, from the text of /proc/self/mountinfo.

    Of several mounts on one point the last listed is the one on top, the
    one a path resolves to. Lines that do not parse are skipped.
    """
    types: dict[str, str] = {}
    for line in data.split(b"\n"):
        fields = line.split(b" ")
        try:
            # id parent major:minor root MOUNT-POINT options [optional...] - TYPE source ...
            kind = fields[fields.index(b"-", 6) + 1]
            types[_unescape(fields[4])] = os.fsdecode(kind)
        except (ValueError, IndexError):
            continue
    return types


def mount_points(data: bytes) -> list[tuple[int, str]]:
    """(mount id, mount point) of each line of /proc/self/mountinfo, in order."""
    points = []
    for line in data.split(b"\n"):
        fields = line.split(b" ")
        try:
            points.append((int(fields[0]), _unescape(fields[4])))
        except (ValueError, IndexError):
            continue
    return points


class MountTable:
    """The mounts of this process, read on first use."""

    def __init__(self, source: str = MOUNTINFO) -> None:
        self._source = source
        self._types: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._types is None:
            try:
                with open(self._source, "rb") as f:
                    self._types = parse_mountinfo(f.read())
            except OSError:
                self._types = {}  # no /proc: no special mounts known, walk everything
        return self._types

    def special_type(self, path: str) -> str | None:
        """The type of the special file system holding ``path`` (absolute), if any.

        The innermost mount containing the path decides: a directory below
        /sys is on sysfs, a tmpfs mounted below /sys is not.
        """
        types = self._load()
        probe = path.rstrip("/") or "/"
        while True:
            kind = types.get(probe)
            if kind is not None:
                return kind if kind in SPECIAL_TYPES else None
            if probe == "/":
                return None
            probe = probe.rpartition("/")[0] or "/"
