"""Reading /proc/self/mountinfo: mount points, their escapes, and which mount decides."""

from __future__ import annotations

from pathlib import Path

from earshot.cas.mounts import MountTable, parse_mountinfo

MOUNTINFO = b"""\
22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 master:2 - cgroup2 cgroup2 rw
50 27 0:40 / /home/u/my\\040proc\\011x rw - proc proc rw
51 27 0:41 / /mnt/data rw - proc proc rw
52 51 0:42 / /mnt/data rw - ext4 /dev/vdb rw
not a mountinfo line
"""


def test_parse_mountinfo_unescapes_paths_and_keeps_the_mount_on_top() -> None:
    types = parse_mountinfo(MOUNTINFO)
    assert types["/home/u/my proc\tx"] == "proc"
    assert types["/sys/fs/cgroup/unified"] == "cgroup2"  # optional fields skipped
    assert types["/mnt/data"] == "ext4"  # mounted over the proc: the last one is seen
    assert len(types) == 7


def test_special_type_is_decided_by_the_innermost_mount_holding_the_path(tmp_path: Path) -> None:
    source = tmp_path / "mountinfo"
    source.write_bytes(MOUNTINFO)
    table = MountTable(str(source))
    assert table.special_type("/proc") == "proc"
    assert table.special_type("/sys/kernel/debug") == "sysfs"
    assert table.special_type("/sys/fs/cgroup") is None  # a tmpfs holds real files
    assert table.special_type("/sys/fs/cgroup/unified/x") == "cgroup2"
    assert table.special_type("/home/u/my proc\tx") == "proc"
    assert table.special_type("/home/u") is None
    assert table.special_type("/mnt/data/f") is None


def test_without_a_mountinfo_no_mount_is_special(tmp_path: Path) -> None:
    assert MountTable(str(tmp_path / "absent")).special_type("/proc") is None
