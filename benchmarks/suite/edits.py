"""Seeded edits an agent might make, the same on every peer's copy of a tree.

Candidates are the tree's regular files under 1 MiB outside the directories
git users ignore wholesale (``.git``, ``node_modules``, ``.venv``), in sorted
order, so two identical copies give the same choice for the same seed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

SKIP_DIRS = {".git", "node_modules", ".venv", "__pycache__"}
MAX_BYTES = 1 << 20


def candidates(root: Path) -> list[str]:
    """Relative paths of the files an edit may pick, sorted."""
    found: list[str] = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if os.path.isfile(path) and not os.path.islink(path) and st.st_size < MAX_BYTES:
                found.append(os.path.relpath(path, root))
    found.sort()
    return found


def edit(root: Path, pool: list[str], count: int, seed: int) -> dict[str, bytes]:
    """Append a line to ``count`` files of ``pool``; their content before, by path."""
    rng = random.Random(seed)
    before: dict[str, bytes] = {}
    for rel in rng.sample(pool, min(count, len(pool))):
        path = root / rel
        before[rel] = path.read_bytes()
        with path.open("ab") as f:
            f.write(f"\n// edit {seed}\n".encode())
    return before


def check_restored(root: Path, before: dict[str, bytes], peer: str) -> None:
    """Every edited file holds its content from before the edit again."""
    wrong = [rel for rel, data in before.items() if (root / rel).read_bytes() != data]
    if wrong:
        raise AssertionError(f"{peer}'s restore left {len(wrong)} files wrong, e.g. {wrong[0]}")
