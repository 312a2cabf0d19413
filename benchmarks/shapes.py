"""Tree shapes beyond the generated source tree: the source files the real
trees' projects hold, and the binary tree.

- ``source_files``: ``count`` small JavaScript modules under ``src/``;
- ``binary``: 2,000 source files and 120 binary assets of 1-16 MiB
  (incompressible), 1 GiB in all.

Made by the suite (``python -m benchmarks tree binary DIR``).
"""

from __future__ import annotations

import os
import random
from pathlib import Path


def source_files(root: Path, count: int, rng: random.Random) -> None:
    for i in range(count):
        d = root / "src" / f"mod{i % 40}" / f"part{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        lines = rng.randrange(5, 120)
        (d / f"file{i}.js").write_text(
            "".join(f"export const v{j} = {rng.randrange(10**6)};\n" for j in range(lines))
        )


def binary(root: Path, files: int = 0, seed: int = 1) -> None:
    """2,000 source files and 120 incompressible assets of 1-16 MiB."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("build/\n")
    source_files(root, 2000, rng)
    assets = root / "assets"
    assets.mkdir()
    total = 0
    for i in range(120):
        size = rng.randrange(1, 17) << 20
        (assets / f"asset{i}.bin").write_bytes(os.urandom(size))
        total += size
