"""What a running process holds, read from /proc; and the interpreter of a script.

* ``rss_mib``: its resident memory (``VmRSS`` of /proc/PID/status);
* ``inotify_watches``: the watches of its inotify descriptors, one
  ``inotify wd:`` line each in /proc/PID/fdinfo/FD (what counts against
  ``fs.inotify.max_user_watches``);
* ``script_python``: the interpreter a console script runs in (its ``#!``
  line), so a figure can time that interpreter's bare start, or run code
  in the install under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def rss_mib(pid: int) -> float:
    """The process's resident memory, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for process {pid}")


def inotify_watches(pid: int) -> int:
    """The inotify watches the process holds, over all its inotify descriptors."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:  # closed since the listing
            continue
        total += sum(1 for line in info.splitlines() if line.startswith("inotify wd:"))
    return total


def script_python(exe: str) -> str:
    """The interpreter of the console script ``exe``; this one if it names none."""
    try:
        with open(exe, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return sys.executable
    if not first.startswith(b"#!"):
        return sys.executable
    words = first[2:].decode().split()
    if not words:
        return sys.executable
    if Path(words[0]).name == "env" and len(words) > 1:
        return words[1]
    return words[0]


def harness_report(argv: list[str], what: str) -> dict[str, Any]:
    """Run a tests/ harness that prints its report as one JSON document (``--json``).

    Its exit code says whether it found violations, which the report lists:
    only a run that printed no report is an error.
    """
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if not done.stdout.strip():
        raise RuntimeError(f"{what} failed: {done.stderr.strip()[-500:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report
