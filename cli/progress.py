"""Progress on the terminal: long work says how far it is, once it has run a second.

``progress_for`` hands a command the ``Progress`` its work reports to. On a
terminal (stderr a tty, ``TERM`` not ``dumb``), without ``--json`` and
outside the hook path, it is a ``TerminalProgress``: nothing shows, and rich
is not even imported, until the work has run ``$EARSHOT_PROGRESS_AFTER``
seconds (default 1; 0 shows it at once, as the tests do). Then a transient
line on stderr gives the stage, the count done of how many, the bytes and
the time left where they are known (``progress_view``); it is gone when the
command prints its result. Anywhere else the work gets ``QUIET``: one empty
call per directory walked or path applied (benchmarks/history/RESULTS-issues-2-25.md, "Progress").

Under the watch daemon a command runs in a worker holding the client's own
stdin, stdout and stderr (``cli/daemon.py``), so the same line reaches the
client's terminal with nothing relayed.

rich hides the cursor while the line shows. Ctrl-C unwinds and clears it;
SIGTERM and SIGHUP kill, and would leave the cursor hidden: while the line
shows, they first clear it and show the cursor, then the process dies of
the signal as it would have (``_restored_on_kill``). Under the daemon the
client passes them on to the worker (``cli/entry.py``), which draws the
line, so the worker does the same on the client's terminal.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from earshot.cas.progress import QUIET, Progress

ENV_AFTER = "EARSHOT_PROGRESS_AFTER"
#: Work shorter than this shows no progress at all.
DEFAULT_AFTER_S = 1.0
#: Set by ``earshot hook`` (cli/entry.py): hooks stay silent, whatever stderr is.
_ENV_HOOK = "EARSHOT_HOOK_STARTED"
#: To the line's start, erase it, show the cursor: what rich's stop does, in one write.
_RESTORE = b"\r\x1b[2K\x1b[?25h"


def on_terminal() -> bool:
    """Whether stderr is a terminal that can redraw a line."""
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _after() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_AFTER, "")))
    except ValueError:
        return DEFAULT_AFTER_S


@contextmanager
def progress_for(as_json: bool) -> Iterator[Progress]:
    """The progress a command's work reports to; the line is cleared on the way out."""
    if as_json or _ENV_HOOK in os.environ or not on_terminal():
        yield QUIET
        return
    view = TerminalProgress(_after())
    with _restored_on_kill(view):
        try:
            yield view
        finally:
            view.close()


@contextmanager
def _restored_on_kill(view: TerminalProgress) -> Iterator[None]:
    """While ``view`` may show, SIGTERM and SIGHUP restore the terminal, then kill.

    The handler runs no other code: no exception unwinds the work (a kill at
    any instant is what crash consistency is built for). It writes the
    restore straight to stderr's descriptor, puts back the default
    disposition and sends the signal again, so the exit is still "killed by
    SIGTERM". Only a signal whose disposition is the default gets it (a
    command with handlers of its own keeps them), and only on the main
    thread, the one Python lets set handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal  # loads enum: only once a command may show a line

    def restore_then_die(signum: int, frame: object) -> None:
        view.stop_showing()
        if view.shown:
            with suppress(OSError):  # a terminal that hung up takes nothing
                os.write(2, _RESTORE)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    mine = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) == signal.SIG_DFL]
    for sig in mine:
        signal.signal(sig, restore_then_die)
    try:
        yield
    finally:
        for sig in mine:
            signal.signal(sig, signal.SIG_DFL)


class TerminalProgress(Progress):
    """Keeps count from the start; shows it (``progress_view.View``) once ``after`` has passed.

    A timer shows it, not the next call: a stage that runs long in one call
    (a store compaction) still gets its line. The lock keeps the count and
    the view in step between the work's thread and the timer's.
    """

    active = True

    def __init__(self, after: float) -> None:
        self._lock = threading.Lock()
        self._stage: tuple[str, int | None, int | None, str] | None = None
        self._done = 0
        self._bytes = 0
        self._view: Any = None
        self._closed = False
        self._drawn = False
        self._timer: threading.Timer | None = None
        if after <= 0:
            self._show()
        else:
            self._timer = threading.Timer(after, self._show)
            self._timer.daemon = True
            self._timer.start()

    def stage(
        self,
        label: str,
        total: int | None = None,
        total_bytes: int | None = None,
        unit: str = "paths",
    ) -> None:
        with self._lock:
            self._stage = (label, total, total_bytes, unit)
            self._done = self._bytes = 0
            if self._view is not None:
                self._view.stage(label, total, total_bytes, unit)

    def advance(self, count: int = 1, nbytes: int = 0) -> None:
        with self._lock:
            self._done += count
            self._bytes += nbytes
            if self._view is not None:
                self._view.advance(count, nbytes)

    @property
    def shown(self) -> bool:
        """Whether the line may be on the terminal now (from rich's start to its stop)."""
        return self._drawn

    def stop_showing(self) -> None:
        """Never show the line from now on. Takes no lock: a signal handler calls
        it, maybe while this very thread holds one."""
        self._closed = True

    def _show(self) -> None:
        from .progress_view import View  # rich, imported only when shown

        with self._lock:
            if self._closed or self._view is not None:
                return
            self._drawn = True  # before rich starts: it hides the cursor at once
            self._view = View()
            if self._stage is not None:
                self._view.stage(*self._stage)
                self._view.advance(self._done, self._bytes)

    def close(self) -> None:
        """Stop the timer and clear the line (the result prints where it was)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            view, self._view = self._view, None
        if view is not None:
            view.stop()
            self._drawn = False
