"""The restore journal: what makes an interrupted restore visible and cleanable.

Written (atomically) before a restore touches the tree, removed after. It
names the restore's temp-file tag and the directories it writes into, so the
next command can report the interruption and the next restore can remove the
temp files it left: they are provably earshot's own.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .restore import remove_temp_files


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A restore that did not finish (found on the next command)."""

    target: str
    started_ns: int


class RestoreJournal:
    """One store's journal file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def begin(self, target: str, tag: str, dirs: list[str]) -> None:
        doc = {"target": target, "tag": tag, "started_ns": time.time_ns(), "dirs": dirs}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.path)

    def end(self) -> None:
        self.path.unlink(missing_ok=True)

    def pending(self) -> Interrupted | None:
        """The restore that was cut off (crash, kill), if any."""
        try:
            doc = json.loads(self.path.read_text())
            return Interrupted(doc["target"], int(doc["started_ns"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def clear(self, root: str) -> None:
        """Remove what an interrupted restore left in ``root``, then the journal."""
        try:
            doc = json.loads(self.path.read_text())
            remove_temp_files(root, doc.get("dirs", []), doc["tag"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        self.end()
