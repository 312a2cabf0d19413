"""The running command's pane: its last lines, live, above the chat's input line.

Output is kept as lines a terminal can show: escape sequences (colours,
cursor moves) are dropped, a carriage return starts its line over (a
progress bar shows its latest state), other control characters go. Only
the last ``LINES`` are kept; the whole output goes to the model and to the
result shown once the command ends.
"""

from __future__ import annotations

import re
import time
from collections import deque

#: Lines of a running command's output the pane shows.
LINES = 10
#: Characters kept of a line not ended yet (wider than any terminal).
_PARTIAL_MAX = 4096
#: CSI and OSC sequences, and any other two-character escape.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _shown(line: str) -> str:
    line = _ESCAPES.sub("", line).rsplit("\r", 1)[-1]
    return _CONTROLS.sub("", line.expandtabs(4))


class CommandPane:
    """The command that runs now, since when, and its last lines."""

    def __init__(self, lines: int = LINES) -> None:
        self.command: str | None = None
        self.started = 0.0
        self.size = lines
        self.lines: deque[str] = deque(maxlen=lines)
        #: Lines of output so far, the ones scrolled out of the pane included.
        self.count = 0
        self._partial = ""

    @property
    def running(self) -> bool:
        return self.command is not None

    def start(self, command: str) -> None:
        self.command = command
        self.started = time.monotonic()
        self.lines.clear()
        self.count = 0
        self._partial = ""

    def feed(self, text: str) -> None:
        *complete, partial = (self._partial + text).split("\n")
        self.lines.extend(_shown(line) for line in complete)
        self.count += len(complete)
        # A line with no end yet (a progress bar redrawn with \r for minutes):
        # only its latest state, and no more of it than a pane can show, is kept.
        self._partial = partial.rsplit("\r", 1)[-1][-_PARTIAL_MAX:]

    def end(self) -> None:
        self.command = None

    def rows(self, width: int) -> list[tuple[str, str]]:
        """The pane as (style, text) rows, each cut to ``width`` columns."""
        if self.command is None:
            return []
        elapsed = int(time.monotonic() - self.started)
        head = f"  ⏵ {_shown(self.command.splitlines()[0] if self.command else '')}"
        count = self.count + bool(self._partial)
        lines = f" · {count} line{'s' if count != 1 else ''}" if count else ""
        tail = f"  {elapsed}s{lines} · Esc stops"
        room = max(10, width - len(tail) - 1)
        rows = [("bold", (head if len(head) <= room else head[: room - 1] + "…") + tail)]
        shown = list(self.lines)
        if self._partial:
            shown.append(_shown(self._partial))
        cut = max(10, width - 5)
        rows += [("fg:ansibrightblack", "    " + line[:cut]) for line in shown[-self.size :]]
        return rows
