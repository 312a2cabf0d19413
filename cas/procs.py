"""Telling one process from another over time: its start time, from /proc.

A pid is reused once its process is gone; (pid, start time) is not: the
kernel's start time in clock ticks since boot differs for any two processes
that ever held the same pid. Standard library only: the thin client and the
intents both use it.
"""

from __future__ import annotations


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name, None if it is gone.

    The command name (field 2) may hold spaces and parentheses: split after it,
    so that index 0 is the whole line's field 3 (the state).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].split()


def _field(pid: int, index: int) -> int | None:
    fields = _stat(pid)
    try:
        return int(fields[index]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (/proc), None if it is gone."""
    return _field(pid, 19)  # field 22 of the whole line


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (/proc), None if it is gone."""
    return _field(pid, 1)  # field 4 of the whole line


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
    fields = _stat(pid)
    if fields is None or len(fields) < 20:
        return False
    if started is not None and fields[19] != str(started).encode():
        return False
    return fields[0] not in (b"Z", b"X")
