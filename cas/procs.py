"""Telling one process from another over time: its start time, from /proc.

A pid is reused once its process is gone; (pid, start time) is not: the
kernel's start time in clock ticks since boot differs for any two processes
that ever held the same pid. Standard library only: the thin client and the
intents both use it.
"""

from __future__ import annotations


def start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (/proc), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after it.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (/proc), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])  # field 4 of the whole line
    except (IndexError, ValueError):
        return None


def name_of(pid: int) -> str | None:
    """The command name the kernel keeps for ``pid`` (``comm``), None if it is gone."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().rstrip(b"\n").decode(errors="replace")
    except OSError:
        return None


def alive(pid: int, started: int | None) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs.

    A zombie counts as gone: it runs nothing and holds nothing.
    """
    now = start_time(pid)
    if now is None or (started is not None and now != started):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    state = data[data.rfind(b")") + 2 :][:1]
    return state not in (b"Z", b"X")
