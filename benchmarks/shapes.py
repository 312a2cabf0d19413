"""Tree shapes beyond the generated source tree, for the per-call benchmarks.

- ``node_modules``: an application's source (2,000 files) beside a
  ``node_modules`` of many tiny files in deep nesting (``files`` in all),
  which its ``.gitignore`` ignores, as npm leaves them.
- ``binary``: 2,000 source files and 120 binary assets of 1-16 MiB
  (incompressible), 1 GiB in all.

    python benchmarks/shapes.py node_modules DIR --files 100000
"""

from __future__ import annotations

import argparse
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


def node_modules(root: Path, files: int, seed: int = 1) -> None:
    """An app beside a node_modules of ``files - 2000`` tiny files, deep."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("node_modules/\ndist/\n*.log\n")
    (root / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    source_files(root, 2000, rng)
    made = 0
    package = 0
    while made < files - 2000:
        depth = rng.randrange(1, 5)
        parts = [root / "node_modules"]
        for level in range(depth):
            parts.append(Path(f"pkg{package}-{level}") if level == 0 else Path("node_modules"))
            parts.append(Path(f"dep{rng.randrange(50)}"))
        pkg_dir = Path(*parts)
        for sub in ("", "lib", "lib/util", "dist"):
            d = pkg_dir / sub if sub else pkg_dir
            d.mkdir(parents=True, exist_ok=True)
            for k in range(rng.randrange(2, 8)):
                (d / f"f{k}.js").write_text(f"module.exports={k};\n")
                made += 1
        (pkg_dir / "package.json").write_text(f'{{"name": "pkg{package}"}}\n')
        made += 1
        package += 1


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


SHAPES = {"node_modules": node_modules, "binary": binary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("root", type=Path)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    SHAPES[args.shape](args.root, args.files, args.seed)


if __name__ == "__main__":
    main()
