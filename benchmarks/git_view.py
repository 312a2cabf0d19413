"""git's view against earshot's: the paths earshot records against the paths git lists.

git's view of a work tree is what it tracks plus what it would add:
``git ls-files -co --exclude-standard`` (tracked, and untracked but not
ignored) together with ``git ls-files`` (the index; tracked files a
pattern ignores are listed there). git lists a nested repository as one
entry, ``dir/`` (and a submodule as its path); both are expanded with the
same commands run inside them, as earshot judges them by their own rules.
Only paths that exist as files or symlinks count (the index also lists
files deleted since). git runs with no user or system configuration:
earshot does not read ``core.excludesFile`` either.

earshot's view: the file and symlink paths of a snapshot of the root, taken
into a fresh store in a temporary directory (files over the size limit are
in the tree as unrecorded, and counted), with keeping ignored files turned
off (``EARSHOT_KEEP_IGNORED=0``): what git ignores is then in the tree as
existence only, and not counted. By default earshot also keeps the content
of small ignored files (``cas/keep.py``): those, from a second snapshot,
must all be paths git lists as ignored (``git ls-files -oi
--exclude-standard``), and are counted as *kept*.

``compare(root)`` gives both counts and every difference; the suite's
figure (benchmarks/figures/git_view.py) runs it on each tree, and
tests/cas/test_fidelity.py on a repository built to hold every case.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from earshot.cas.digest import Digest
from earshot.cas.entrykey import EXISTENCE_ONLY
from earshot.cas.keep import KeepIgnored
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.recording import ScanOptions
from earshot.cas.tree import Kind, Unrecorded


def _git(top: Path, home: Path, *args: str) -> list[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
    }
    out = subprocess.run(
        ["git", "--no-optional-locks", *args, "-z"],
        cwd=top,
        env=env,
        capture_output=True,
        check=True,
    ).stdout
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def _is_repo_top(path: Path) -> bool:
    return (path / ".git").exists()


def git_paths(top: Path, home: Path, prefix: str = "") -> tuple[set[str], int]:
    """(files and links git lists under ``top``, nested ones expanded; tracked-but-ignored)."""
    listed = set(_git(top, home, "ls-files", "-co", "--exclude-standard"))
    listed |= set(_git(top, home, "ls-files"))
    tracked_ignored = len(_git(top, home, "ls-files", "-ci", "--exclude-standard"))
    out: set[str] = set()
    for rel in listed:
        path = top / rel
        if rel.endswith("/") or (path.is_dir() and not path.is_symlink() and _is_repo_top(path)):
            nested, nested_ignored = git_paths(path, home, f"{prefix}{rel.rstrip('/')}/")
            out |= nested
            tracked_ignored += nested_ignored
            continue
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue  # in the index, deleted since
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            out.add(prefix + rel)
    return out, tracked_ignored


def _walk(reader: ObjectReader, tree: Digest, prefix: str, out: set[str]) -> None:
    for entry in reader.read_tree(tree):
        path = prefix + entry.name.decode("utf-8", "surrogateescape")
        if entry.kind is Kind.DIR and entry.digest is not None:
            _walk(reader, entry.digest, path + "/", out)
        elif entry.kind is not Kind.UNRECORDED or (
            entry.reason is not Unrecorded.SPECIAL and entry.reason not in EXISTENCE_ONLY
        ):
            out.add(path)


def earshot_paths(root: Path, keep: KeepIgnored) -> tuple[set[str], float]:
    """(files and links a fresh snapshot of ``root`` records, seconds it took)."""
    out: set[str] = set()
    with (
        tempfile.TemporaryDirectory(prefix="earshot-fidelity-") as home,
        Project(root, home=Path(home), options=ScanOptions(keep=keep)) as project,
    ):
        start = time.perf_counter()
        recorded = project.snapshot()
        seconds = time.perf_counter() - start
        with project.store.reader() as reader:
            _walk(reader, recorded.snapshot.tree, "", out)
    return out, seconds


@dataclass
class Fidelity:
    """The comparison of one root."""

    root: str
    earshot: int
    git: int
    tracked_ignored: int
    only_earshot: list[str] = field(default_factory=list)
    only_git: list[str] = field(default_factory=list)
    snapshot_seconds: float = 0.0
    #: Ignored files whose content earshot keeps by default (beyond git's view).
    kept: int = 0
    #: Kept paths git does not list as ignored: each one is a defect.
    kept_not_ignored: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not (self.only_earshot or self.only_git or self.kept_not_ignored)


def git_ignored(top: Path, home: Path, prefix: str = "") -> set[str]:
    """Files and links git lists as ignored and untracked under ``top`` (nested ones too)."""
    out = {prefix + p for p in _git(top, home, "ls-files", "-oi", "--exclude-standard")}
    for rel in _git(top, home, "ls-files", "-co", "--exclude-standard"):
        path = top / rel.rstrip("/")
        if rel.endswith("/") or (path.is_dir() and not path.is_symlink() and _is_repo_top(path)):
            out |= git_ignored(path, home, f"{prefix}{rel.rstrip('/')}/")
    return out


def compare(root: Path) -> Fidelity:
    root = root.resolve()
    with tempfile.TemporaryDirectory(prefix="fidelity-home-") as home:
        expected, tracked_ignored = git_paths(root, Path(home))
        ignored = git_ignored(root, Path(home))
    recorded, seconds = earshot_paths(root, KeepIgnored(enabled=False))
    with_kept, _ = earshot_paths(root, KeepIgnored())
    kept = with_kept - recorded
    return Fidelity(
        str(root),
        earshot=len(recorded),
        git=len(expected),
        tracked_ignored=tracked_ignored,
        only_earshot=sorted(recorded - expected),
        only_git=sorted(expected - recorded),
        snapshot_seconds=round(seconds, 2),
        kept=len(kept),
        kept_not_ignored=sorted(kept - ignored),
    )


def git(root: Path, *args: str) -> None:
    """One git command in ``root``; no configuration of the machine's is read."""
    with tempfile.TemporaryDirectory(prefix="git-view-home-") as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "GIT_CONFIG_NOSYSTEM": "1",
            "LC_ALL": "C",
        }
        subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, check=True)


def make_repository(root: Path) -> None:
    """``git init`` in ``root`` and every file staged (``add -A``), as a project's
    own repository holds its tree."""
    git(root, "init", "-q")
    git(root, "add", "-A")
