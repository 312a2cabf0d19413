"""Seeded edits an agent might make, the same on every peer's copy of a tree.

Candidates are the files an agent edits: those git would not ignore (listed
by ``git ls-files -o --exclude-standard`` against an empty repository outside
the tree), regular, under 1 MiB, in sorted order, so two identical copies
give the same choice for the same seed. Ignored files are left out: no git
peer records them, so no git restore could bring an edit of one back.
"""

from __future__ import annotations

import os
import random
import stat
import subprocess
import tempfile
from pathlib import Path

MAX_BYTES = 1 << 20


def candidates(root: Path) -> list[str]:
    """Relative paths of the files an edit may pick, sorted."""
    root = root.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-edits-") as scratch:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": scratch,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_DIR": os.path.join(scratch, "git"),
            "GIT_WORK_TREE": str(root),
        }
        subprocess.run(["git", "init", "-q"], env=env, check=True, capture_output=True)
        listed = subprocess.run(
            ["git", "ls-files", "-o", "--exclude-standard", "-z"],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        ).stdout.decode("utf-8", "surrogateescape")
    found = []
    for rel in listed.split("\0"):
        if not rel:
            continue
        st = os.lstat(root / rel)
        if stat.S_ISREG(st.st_mode) and st.st_size < MAX_BYTES:
            found.append(rel)
    return sorted(found)


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
