"""Per-file backups, as Claude Code and the dsh-rewind plugin keep them.

Before a Write or an Edit, the file's current content (or the fact that it
did not exist) is copied into a backup directory outside the tree; a rewind
copies each backed-up file back, or deletes the file a Write created. Cheap:
one copy per edited file. Blind: what a shell command does is never seen.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from benchmarks.peers.base import disk_usage


class FileBackups:
    """The backups of one session: the first version of each file it touched."""

    name = "file-backups"

    def __init__(self, tree: Path, store: Path) -> None:
        self.tree = tree
        self.store = store
        self.first: dict[str, Path | None] = {}  # path -> its backup, None: did not exist

    def init(self) -> None:
        shutil.rmtree(self.store, ignore_errors=True)
        self.store.mkdir(parents=True)
        self.first.clear()

    def before_edit(self, rel: str) -> None:
        """Write/Edit is about to change ``rel``: keep its content first (once)."""
        if rel in self.first:
            return
        path = self.tree / rel
        if not path.is_file():
            self.first[rel] = None
            return
        backup = self.store / f"{hashlib.sha256(rel.encode()).hexdigest()[:16]}@v1"
        shutil.copy2(path, backup)
        self.first[rel] = backup

    def restore(self) -> None:
        """Put every backed-up file back; delete the ones a Write created."""
        for rel, backup in self.first.items():
            path = self.tree / rel
            if backup is None:
                if path.is_file() or path.is_symlink():
                    os.unlink(path)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(backup, path)

    def store_bytes(self) -> int:
        return disk_usage(self.store)
