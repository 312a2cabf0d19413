"""The progress line itself, drawn by rich on stderr (imported only once it shows).

One line, redrawn ten times a second and cleared at the end (transient)::

    undoing ━━━━━━━━━━━━━━━━━━━━━━━         6,120 of 11,101 paths  41.2 MiB of 80.4 MiB  0:04 left

The bar pulses when the total is not known (a walk of the tree); the time
left is given only when it is, from how far the count and the bytes are.
Lines written to stderr meanwhile (warnings) print above it.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, Task, TaskID, TextColumn
from rich.progress import Progress as Bar
from rich.text import Text

from .render import human_bytes

#: No time left is guessed from less than this much of a stage (seconds).
_SETTLED_S = 0.5


class _Count(ProgressColumn):
    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "paths")
        done = int(task.completed)
        if task.total is None:
            return Text(f"{done:,} {unit}")
        return Text(f"{done:,} of {int(task.total):,} {unit}")


class _Bytes(ProgressColumn):
    def render(self, task: Task) -> Text:
        done, total = task.fields.get("nbytes", 0), task.fields.get("total_bytes")
        if total:
            return Text(f"{human_bytes(done)} of {human_bytes(total)}")
        return Text(human_bytes(done) if done else "")


class _Left(ProgressColumn):
    def render(self, task: Task) -> Text:
        left = time_left(task)
        if left is None:
            return Text("")
        minutes, seconds = divmod(int(left + 0.5), 60)
        return Text(f"{minutes}:{seconds:02d} left")


def time_left(task: Task) -> float | None:
    """Seconds left, from the share done (of the count and, when known, the bytes)."""
    elapsed = task.elapsed
    if not task.total or elapsed is None or elapsed < _SETTLED_S:
        return None
    share = task.completed / task.total
    total_bytes = task.fields.get("total_bytes")
    if total_bytes:  # a few large files take most of the time: weigh the bytes too
        share = (share + task.fields.get("nbytes", 0) / total_bytes) / 2
    if share <= 0:
        return None
    return max(0.0, elapsed * (1 - share) / share)


class View:
    """A live, transient progress line on stderr."""

    def __init__(self) -> None:
        self.bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            _Count(),
            _Bytes(),
            _Left(),
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,
        )
        self.task: TaskID | None = None
        self.nbytes = 0
        self.bar.start()

    def stage(self, label: str, total: int | None, total_bytes: int | None, unit: str) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.nbytes = 0
        self.task = self.bar.add_task(
            label, total=total, unit=unit, nbytes=0, total_bytes=total_bytes
        )
        self.bar.refresh()  # every stage is drawn at least once, however short

    def advance(self, count: int, nbytes: int) -> None:
        if self.task is None:
            return
        self.nbytes += nbytes
        self.bar.update(self.task, advance=count, nbytes=self.nbytes)

    def stop(self) -> None:
        self.bar.stop()
