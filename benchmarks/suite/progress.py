"""One progress line: what is running, how long it has run, how long is left.

The plan gives every job a weight (its tree's file count times the figure's
relative cost); what is left is the time the finished jobs took per unit of
weight, times the weight still to run, less what the running job has had.
The estimate improves as the run goes; it is shown as "~" for that. On a
terminal the line is rewritten in place; otherwise one line per step, so a
log shows the run's course.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def clock(seconds: float) -> str:
    """1:05:09, 7:40 or 0:12."""
    s = int(seconds)
    hours, rest = divmod(s, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The run's progress, on stderr."""

    def __init__(self, total_weight: float, stream: TextIO = sys.stderr) -> None:
        self.total = max(total_weight, 1e-9)
        self.done = 0.0
        self.job_weight = 0.0
        self.job = ""
        self.stream = stream
        self.tty = stream.isatty()
        self.start = time.monotonic()
        self.job_start = self.start
        self.spent = 0.0  # seconds the finished jobs took

    def begin(self, job: str, weight: float) -> None:
        """A job starts: a figure on one tree."""
        self.job, self.job_weight = job, weight
        self.job_start = time.monotonic()
        self.step("")

    def end(self) -> None:
        """The job is over (done, or failed): its weight counts as run."""
        self.done += self.job_weight
        self.spent += time.monotonic() - self.job_start
        self.job_weight = 0.0

    def left(self) -> str:
        if self.done <= 0 or self.spent <= 0:
            return "?"
        running = time.monotonic() - self.job_start if self.job_weight else 0.0
        rate = self.spent / self.done
        return "~" + clock(max(rate * (self.total - self.done) - running, 0.0))

    def step(self, what: str) -> None:
        """What the job is doing now."""
        elapsed = clock(time.monotonic() - self.start)
        pct = 100 * self.done / self.total
        line = f"[{elapsed} elapsed, {self.left()} left, {pct:3.0f}%] {self.job}"
        if what:
            line += f" · {what}"
        if self.tty:
            width = 120
            self.stream.write("\r" + line[:width].ljust(width))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def say(self, message: str) -> None:
        """A line that stays (a skipped tree, a figure's failure)."""
        if self.tty:
            self.stream.write("\r" + " " * 120 + "\r")
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        self.say(f"done in {clock(time.monotonic() - self.start)}")
