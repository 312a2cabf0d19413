"""Fidelity on a generated repository: earshot records exactly what git lists.

git's list is ``git ls-files -co --exclude-standard`` plus ``git ls-files``
(the index), nested repositories and submodules expanded with the same
commands run inside them: benchmarks/git_view.py, the comparison the
benchmark suite runs on real trees, is what this test runs.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import git_view

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

Git = Callable[..., str]


def put(top: Path, rel: str, data: str = "x\n") -> None:
    path = top / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)


def build_repository(top: Path, git: Git) -> None:
    """Every way a path can be tracked, ignored, both, or in another repository."""
    top.mkdir()
    git(top, "init", "-q")
    put(top, ".gitignore", "*.log\n!keep.log\nbuild/\n/out\ndocs/**/*.tmp\n*.patch\n")
    put(top, ".git/info/exclude", "*.local\n")
    for rel in (
        "a.txt",
        "keep.log",  # re-included by a negation
        "debug.log",
        "out",  # anchored: only the top one is ignored
        "sub/out",
        "src/x.c",
        "src/y.log",
        "src/logs/important",
        "src/logs/noise",
        "docs/a/b/c.tmp",
        "docs/a/readme",
        "build/gen.c",
        "build/sub/conf.h",
        "build/sub/conf.o",
        "tools/fix.patch",
        "tools/local.patch",
        "notes.local",
        "with space.txt",
        "é/ü.txt",
        "tracked-then-deleted.txt",
    ):
        put(top, rel)
    put(top, "src/.gitignore", "logs/\n!logs/important\n")  # no re-include below an excluded dir
    os.symlink("a.txt", top / "link")
    os.symlink("build", top / "link-to-ignored-dir")
    git(top, "add", ".")
    git(top, "add", "-f", "build/sub/conf.h", "tools/fix.patch", "src/logs/noise", "debug.log")
    git(top, "commit", "-q", "-m", "one")
    (top / "tracked-then-deleted.txt").unlink()
    put(top, "staged.txt")
    git(top, "add", "staged.txt")
    put(top, "untracked.txt")

    dep = top / "vendor" / "dep"  # a nested repository, not a submodule
    dep.mkdir(parents=True)
    git(dep, "init", "-q")
    put(dep, ".gitignore", "*.o\ntmp/\n")
    for rel in ("main.c", "lib.o", "blob.o", "debug.log", "tmp/scratch", "tmp/kept"):
        put(dep, rel)
    git(dep, "add", ".")
    git(dep, "add", "-f", "blob.o", "tmp/kept")

    lib = top.parent / "sublib"  # a submodule: a gitlink in the index, its own repository
    lib.mkdir()
    git(lib, "init", "-q")
    put(lib, ".gitignore", "*.bin\n")
    put(lib, "lib.c")
    put(lib, "data.bin")
    git(lib, "add", ".")
    git(lib, "add", "-f", "data.bin")
    git(lib, "commit", "-q", "-m", "lib")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/sub")
    put(top, "libs/sub/local.bin")


def test_earshot_records_exactly_the_paths_git_lists_on_a_generated_repository(
    tmp_path: Path, git: Git
) -> None:
    top = tmp_path / "repo"
    build_repository(top, git)
    result = git_view.compare(top)
    assert (result.only_earshot, result.only_git) == ([], [])
    assert result.earshot == result.git
    # tracked but ignored: debug.log, build/sub/conf.h, tools/fix.patch, src/logs/noise,
    # vendor/dep/blob.o and tmp/kept, libs/sub/data.bin
    assert result.tracked_ignored == 7
    assert result.git == 26
    # What earshot keeps beyond git's view is what git ignores, and small:
    # every ignored file of this repository but the two in build/, a build
    # output directory.
    assert result.kept_not_ignored == []
    assert result.kept == 9
