"""What a snapshot peer can do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class Checkpointer(Protocol):
    """One way of checkpointing a tree, working on its own copy of it."""

    name: str
    tree: Path

    def init(self) -> None:
        """A new, empty store (not timed)."""

    def snapshot(self) -> str:
        """Record the whole tree; return the checkpoint's id."""
        ...

    def restore(self, ref: str) -> None:
        """Bring the tree back to a checkpoint, the peer's own way."""

    def gc(self) -> None:
        """The peer's own housekeeping, keeping every checkpoint."""

    def store_bytes(self) -> int:
        """Bytes its store takes on disk."""
        ...


def disk_usage(path: Path) -> int:
    """Bytes allocated on disk under ``path``, du-style: sum of ``st_blocks * 512``.

    Hard links are counted once; symlinks are not followed.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += st.st_blocks * 512
    return total + os.lstat(path).st_blocks * 512
