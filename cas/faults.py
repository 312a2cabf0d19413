"""Named fault points: a kill or an I/O error at an exact instant, for crash tests.

A crash test must make its crash happen where it says, and know that it did.
``point(site)`` is placed at every instant that matters for durability (an
early flush of objects, a commit, a write into the tree); it does nothing
unless ``$EARSHOT_FAULTS`` names the site:

    EARSHOT_FAULTS="site[@N[+]][=action],..."

``N`` is which arrival at the site fires (default 1; ``N+``: that one and
every one after it, a disk that stays full); ``action`` is ``kill``
(SIGKILL to this process, the default), ``term`` (SIGTERM), ``int``
(SIGINT, as Ctrl-C), ``hang`` (sleep an hour there: a store that
never answers, for timeouts), ``stop`` (SIGSTOP: the test acts, say edits
a file, then sends SIGCONT to the pid the line names), ``enospc`` or ``eio`` (raise that OSError
there). Before firing, the point writes
``earshot-fault: SITE`` to stderr, so a test can assert where the crash was.
The plan is read once, at import; unset, a point costs one global lookup.
A command with a plan runs in its own process, unless
``$EARSHOT_FAULTS_HOSTED=1`` sends it to the root's daemon, whose worker
takes the plan (a fault in a worker, while its client is killed, say).
"""

from __future__ import annotations

import errno
import os
import signal
import time

ENV = "EARSHOT_FAULTS"
_ACTIONS = ("kill", "term", "int", "hang", "stop", "enospc", "eio")


def _parse(text: str) -> dict[str, tuple[int, bool, str]]:
    plan: dict[str, tuple[int, bool, str]] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        site, _, action = item.partition("=")
        site, _, nth = site.partition("@")
        action = action or "kill"
        onward = nth.endswith("+")
        nth = nth.removesuffix("+")
        if action not in _ACTIONS or (nth and not nth.isdigit()):
            raise ValueError(
                f"{ENV}: cannot read {item!r} (site[@N[+]][=kill|term|int|hang|stop|enospc|eio])"
            )
        plan[site] = (int(nth or 1), onward, action)
    return plan


def _load() -> dict[str, tuple[int, bool, str]] | None:
    try:
        return _parse(os.environ.get(ENV, "")) or None
    except ValueError as exc:
        os.write(2, f"earshot: {exc}; no fault is planned\n".encode())
        return None


_PLAN = _load()
_SEEN: dict[str, int] = {}


def reload() -> None:
    """Read ``$EARSHOT_FAULTS`` again: a daemon's worker takes its client's plan."""
    global _PLAN
    _PLAN = _load()
    _SEEN.clear()


def armed(site: str) -> bool:
    """Whether the next arrival at ``site`` fires (to set up a torn write, say)."""
    if _PLAN is None or site not in _PLAN:
        return False
    nth, onward, _action = _PLAN[site]
    arrival = _SEEN.get(site, 0) + 1
    return arrival == nth or (onward and arrival > nth)


def point(site: str) -> None:
    """A place where a planned fault may fire (see the module's docstring)."""
    if _PLAN is None or site not in _PLAN:
        return
    count = _SEEN.get(site, 0) + 1
    _SEEN[site] = count
    nth, onward, action = _PLAN[site]
    if count != nth and not (onward and count > nth):
        return
    if action == "stop":
        os.write(2, f"earshot-fault: {site} (stopped: pid {os.getpid()})\n".encode())
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    os.write(2, f"earshot-fault: {site}\n".encode())
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action in ("term", "int"):
        os.kill(os.getpid(), signal.SIGTERM if action == "term" else signal.SIGINT)
    elif action == "hang":
        time.sleep(3600)
    else:
        code = errno.ENOSPC if action == "enospc" else errno.EIO
        raise OSError(code, os.strerror(code), f"<fault {site}>")
