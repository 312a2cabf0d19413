"""The machine a run measured on: every figure is quoted with it."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _cmd(*argv: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    return (out.stdout or out.stderr).strip()


def _proc_field(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def mount_type(path: Path) -> str:
    """The filesystem type of the mount holding ``path``, from /proc/mounts."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in lines:
        parts = line.split()
        if len(parts) < 3 or len(parts[1]) < len(best):
            continue
        if real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"):
            best, kind = parts[1], parts[2]
    return kind


def describe(work_dir: Path, earshot_exe: str) -> dict[str, Any]:
    """nproc, CPU, RAM, the work dir's filesystem, the tools' versions, the load."""
    return {
        "hostname": platform.node(),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "ram": _proc_field("/proc/meminfo", "MemTotal"),
        "kernel": platform.release(),
        "work_dir": str(work_dir),
        "work_dir_fs": mount_type(work_dir),
        "python": platform.python_version(),
        "git": _cmd("git", "--version"),
        "earshot": _cmd(earshot_exe, "--version"),
        "loadavg_start": list(os.getloadavg()),
    }


def can_drop_caches() -> bool:
    """Whether this process may write /proc/sys/vm/drop_caches (root, not in a
    container that mounts /proc/sys read-only)."""
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def drop_caches() -> None:
    """Write dirty pages, then drop the page cache: the next read comes from disk."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
