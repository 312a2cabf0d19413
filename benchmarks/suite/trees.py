"""The trees the suite measures on, made once and copied per peer.

* ``generated-N``: gen_tree's seeded source tree of N files (10k to 1M);
* ``kernel``: the Linux source from Debian's ``linux-source-6.1`` package
  (``/usr/src/linux-source-6.1.tar.xz``), with the two lines Debian appends to
  the top .gitignore (``/*``, ``!/debian/``) dropped, as the kernel's own
  repository has it: ~78k files, 306 .gitignore files;
* ``node_modules``: a Next.js app, its ``node_modules`` installed by
  ``npm ci`` from the lockfile in benchmarks/trees/npm-app (ignored, deep,
  ~45k tiny files);
* ``venv``: a small Python project beside a ``.venv`` holding django, pytest,
  requests and numpy, pinned in benchmarks/trees/py-app (ignored; large
  compiled extensions);
* ``binary``: 2,000 source files and 120 incompressible assets of 1-16 MiB.

A tree is made once into the cache directory (``--cache``; default
benchmarks/work/trees) and reused by later runs; every peer then works on a
copy of its own (``cp -a``), so one peer's restore never rewrites the files
another peer's stat cache knows.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks import gen_tree, shapes
from benchmarks.suite.record import TreeInfo

HERE = Path(__file__).resolve().parent.parent
KERNEL_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
DEBIAN_LINES = ("/*", "!/debian/")
SEED = 1


class TreeUnavailable(RuntimeError):
    """A real tree cannot be made here (no tarball, no npm); says what to install."""


@dataclass(frozen=True)
class TreeSpec:
    """One tree of the plan."""

    key: str
    kind: str
    files: int  # the generated size; 0 for real trees (counted once made)

    @property
    def label(self) -> str:
        return f"{self.files:,} generated files" if self.kind == "generated" else self.key


def parse(name: str) -> TreeSpec:
    """``generated-100000`` (or ``100k``, ``1M``), or a real tree: ``kernel``,
    ``node_modules``, ``venv``, ``binary``."""
    if name in MAKERS:
        return TreeSpec(name, name, 0)
    size = name.removeprefix("generated-")
    return TreeSpec(f"generated-{parse_size(size)}", "generated", parse_size(size))


def parse_size(text: str) -> int:
    """10000, 10k, 1M."""
    t = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    try:
        n = int(float(t[:-1] if scale > 1 else t) * scale)
    except ValueError:
        raise ValueError(f"not a tree size or name: {text!r}") from None
    if n <= 0:
        raise ValueError(f"not a tree size: {text!r}")
    return n


def _run(argv: list[str], cwd: Path) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise TreeUnavailable(f"{' '.join(argv)} failed: {proc.stderr.strip()[-400:]}")


def _generated(spec: TreeSpec, root: Path, kernel: Path | None) -> str:
    gen_tree.generate(root, spec.files, SEED)
    return f"benchmarks/gen_tree.py, {spec.files} files, seed {SEED}"


def _kernel(spec: TreeSpec, root: Path, kernel: Path | None) -> str:
    source = kernel or KERNEL_TARBALL
    if source.is_dir():
        shutil.copytree(source, root, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    elif source.is_file():
        root.mkdir(parents=True)
        _run(["tar", "-xf", str(source), "--strip-components=1", "-C", str(root)], root)
    else:
        raise TreeUnavailable(
            f"no kernel source at {source}: `apt-get install linux-source-6.1`, or --kernel DIR"
        )
    top = root / ".gitignore"
    lines = top.read_text().splitlines(keepends=True)
    top.write_text("".join(line for line in lines if line.strip() not in DEBIAN_LINES))
    return f"{source} (Debian's two top-level .gitignore lines dropped)"


def _node_modules(spec: TreeSpec, root: Path, kernel: Path | None) -> str:
    if shutil.which("npm") is None:
        raise TreeUnavailable("no npm here: `apt-get install npm`")
    shutil.copytree(HERE / "trees" / "npm-app", root)
    shapes.source_files(root, 300, random.Random(SEED))
    (root / ".gitignore").write_text("node_modules/\n.next/\ncoverage/\n")
    _run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], root)
    return "npm ci of benchmarks/trees/npm-app/package-lock.json, and 300 source files"


def _venv(spec: TreeSpec, root: Path, kernel: Path | None) -> str:
    root.mkdir(parents=True)
    shapes.source_files(root, 400, random.Random(SEED))
    (root / ".gitignore").write_text(".venv/\n__pycache__/\n*.pyc\n.env\n")
    (root / ".env").write_text("SECRET_KEY=local-only\n")
    _run([sys.executable, "-m", "venv", ".venv"], root)
    requirements = HERE / "trees" / "py-app" / "requirements.txt"
    _run([".venv/bin/pip", "install", "-q", "-r", str(requirements)], root)
    return "python -m venv .venv + pip install of benchmarks/trees/py-app, and 400 source files"


def _binary(spec: TreeSpec, root: Path, kernel: Path | None) -> str:
    shapes.binary(root, seed=SEED)
    return "benchmarks/shapes.py binary: 2,000 source files, 120 random assets of 1-16 MiB"


MAKERS: dict[str, Callable[[TreeSpec, Path, Path | None], str]] = {
    "kernel": _kernel,
    "node_modules": _node_modules,
    "venv": _venv,
    "binary": _binary,
}


def make(spec: TreeSpec, root: Path, kernel: Path | None = None) -> str:
    """Make the tree ``spec`` names at ``root``; returns where it came from."""
    return MAKERS.get(spec.kind, _generated)(spec, root, kernel)


def describe(spec: TreeSpec, root: Path, source: str) -> TreeInfo:
    """Files, bytes and .gitignore files of a made tree."""
    files = size = ignores = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            size += st.st_size
            ignores += name == ".gitignore"
    return TreeInfo(spec.key, spec.kind, files, size, ignores, source)


def prepare(spec: TreeSpec, cache: Path, kernel: Path | None = None) -> tuple[Path, TreeInfo]:
    """The pristine tree in the cache, made now unless an earlier run made it."""
    cache = cache.resolve()
    root = cache / spec.key
    done = cache / f"{spec.key}.made"
    if not done.exists():
        if root.exists():
            shutil.rmtree(root)  # a make cut short
        cache.mkdir(parents=True, exist_ok=True)
        done.write_text(make(spec, root, kernel) + "\n")
    return root, describe(spec, root, done.read_text().strip())


def copy(pristine: Path, dest: Path) -> Path:
    """A copy of its own for one peer (modes, times and symlinks kept)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(pristine), str(dest)], check=True)
    return dest
