"""Progress of long work: what runs now, how much of it is done, and of how much.

Work below the CLI (a scan, a restore, an undo, gc, fsck) reports through a
``Progress``. This base does nothing, and ``QUIET`` is what every caller gets
by default: work nobody watches pays one empty method call per directory
scanned or path applied, nothing per file read. A view that shows progress
(the CLI's, on a terminal) overrides ``stage`` and ``advance`` and sets
``active``; work computes totals it does not need anyway (fsck's object
count, say) only when ``active``.
"""

from __future__ import annotations


class Progress:
    """Receives the progress of long work; this one ignores it (``QUIET``)."""

    #: Whether anyone may show it: totals that cost a pass are counted only then.
    active = False

    def stage(
        self,
        label: str,
        total: int | None = None,
        total_bytes: int | None = None,
        unit: str = "paths",
    ) -> None:
        """A stage of the work begins: ``label`` (a verb: "scanning"), and
        ``total`` items and ``total_bytes`` when known (None: not known)."""

    def advance(self, count: int = 1, nbytes: int = 0) -> None:
        """``count`` more items of the current stage are done, ``nbytes`` more bytes."""


#: The progress of work nobody watches.
QUIET = Progress()
