"""A hook command that hangs with a child of its own, and whether both were killed."""

from __future__ import annotations

import os
import select
from pathlib import Path


def hanging(where: Path, pids: Path) -> Path:
    """A command that never answers, with a child of its own; both pids go to ``pids``."""
    where.mkdir(parents=True, exist_ok=True)
    script = where / "hang"
    script.write_text(
        f"#!/bin/sh\nsleep 1000 &\necho $$ $! > {pids}.tmp\nmv {pids}.tmp {pids}\nwait\n"
    )
    script.chmod(0o755)
    return script


def ends(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` ends (or has), waiting on its pidfd: a SIGKILL sent
    lands at once, but the exit is the kernel's to finish."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(int(within_s * 1000)))
    finally:
        os.close(fd)


def all_gone(pids: Path) -> bool:
    """Whether both processes named in ``pids`` ended."""
    numbers = [int(x) for x in pids.read_text().split()]
    assert len(numbers) == 2
    return all(ends(p) for p in numbers)
