"""Progress on the terminal: long work says how far it is, once it has run a second.

``progress_for`` hands a command the ``Progress`` its work reports to. On a
terminal (stderr a tty, ``TERM`` not ``dumb``), without ``--json`` and
outside the hook path, it is a ``TerminalProgress``: nothing shows, and rich
is not even imported, until the work has run ``$EARSHOT_PROGRESS_AFTER``
seconds (default 1; 0 shows it at once, as the tests do). Then a transient
line on stderr gives the stage, the count done of how many, the bytes and
the time left where they are known (``progress_view``); it is gone when the
command prints its result. Anywhere else the work gets ``QUIET``: one empty
call per directory walked or path applied (benchmarks/RESULTS.md, "Progress").

Under the watch daemon a command runs in a worker holding the client's own
stdin, stdout and stderr (``cli/daemon.py``), so the same line reaches the
client's terminal with nothing relayed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from earshot.cas.progress import QUIET, Progress

ENV_AFTER = "EARSHOT_PROGRESS_AFTER"
#: Work shorter than this shows no progress at all.
DEFAULT_AFTER_S = 1.0
#: Set by ``earshot hook`` (cli/entry.py): hooks stay silent, whatever stderr is.
_ENV_HOOK = "EARSHOT_HOOK_STARTED"


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
    try:
        yield view
    finally:
        view.close()


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

    def _show(self) -> None:
        from .progress_view import View  # rich, imported only when shown

        with self._lock:
            if self._closed or self._view is not None:
                return
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
