"""Which process is the agent: the one whose life keeps its open batch live.

An agent runs each hook through a shell (Claude Code: ``/bin/sh -c``), and
the hook may reach earshot through further wrappers (``env``, ``timeout``)
or, hosted by the watch daemon, through earshot's thin client (``earshot``).
The agent is the first ancestor of the hook that is none of those. An agent
written in Python counts as one: a Python process is never taken for a wrapper.
"""

from __future__ import annotations

import os

from earshot.cas.procs import name_of, parent_of, start_time

#: Programs that run a hook on the agent's behalf and end with it.
_WRAPPERS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "fish",
        "busybox",
        "env",
        "timeout",
        "nice",
        "nohup",
        "stdbuf",
        "earshot",
    }
)
_MAX_DEPTH = 16


def agent_process(
    hook_pid: int | None = None, environ: dict[str, str] | None = None
) -> tuple[int, int | None] | None:
    """(pid, start time) of the agent that ran the hook process ``hook_pid``
    (default: this process); None when no such ancestor is found (pid 1 reached).

    Claude Code names itself in ``$CLAUDE_PID``: an ancestor of the hook with
    that pid is the agent, whatever runs between.
    """
    env = os.environ if environ is None else environ
    pid = parent_of(hook_pid if hook_pid is not None else os.getpid())
    named = env.get("CLAUDE_PID", "")
    if named.isdigit() and _ancestor(int(named), pid):
        return int(named), start_time(int(named))
    for _ in range(_MAX_DEPTH):
        if pid is None or pid <= 1:
            return None
        name = name_of(pid)
        if name is None:
            return None
        if name not in _WRAPPERS:
            return pid, start_time(pid)
        pid = parent_of(pid)
    return None


def _ancestor(wanted: int, pid: int | None) -> bool:
    for _ in range(_MAX_DEPTH):
        if pid is None or pid <= 1:
            return False
        if pid == wanted:
            return True
        pid = parent_of(pid)
    return False
