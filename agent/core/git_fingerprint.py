"""A stat fingerprint of the user's git directories, to tell that a command changed them.

earshot never writes a ``.git``, and never records or restores one: a shell
command that writes there (``git commit``, ``git checkout``, a hook
installed with ``cp``) is the user's business, but undo cannot take it
back, so the call's result must say so. Comparing a fingerprint taken
before the command with one taken after tells it cheaply:

- the git directory of the repository holding the root (the ``.git`` at or
  above it; a ``.git`` file's ``gitdir:`` for a worktree or submodule, and
  then its ``commondir`` too), and each submodule's git directory under
  ``modules/``;
- in each: the directory itself and every entry at its top (git replaces
  HEAD, index, config, packed-refs through a lock file and a rename, which
  changes the directory; a file written in place changes its own stat),
  the entries of ``refs/``, ``refs/heads/``, ``refs/remotes/``, ``hooks/``,
  ``info/``, ``logs/``, each ``worktrees/<name>/``, and the ``objects/``
  fan-out directories (a new loose object changes its fan-out directory's
  mtime). A ref git updates goes through a lock file and a rename, which
  changes the directory holding it; a ref rewritten in place in a directory
  not listed (a tag in ``refs/tags/``) is not seen.

Each entry is keyed by (mtime_ns, ctime_ns, size, inode): ctime catches a
``chmod +x`` of a hook. Measured on a repository with 256 fan-out
directories, 2,000 loose tags and 300,000 objects: 287 entries in about a
millisecond; a one-commit repository, 52 in a fifth of that
(docs/ARCHITECTURE.md, ``benchmarks/figures/git_fingerprint.py``).

Not seen: a nested repository that is not a submodule (finding one needs a
walk of the whole tree), and a write deep inside an unlisted subdirectory
of a git directory (``lfs/``, ``rr-cache/``) that adds no entry to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: (mtime_ns, ctime_ns, size, inode) of one entry.
Stamp = tuple[int, int, int, int]

#: Subdirectories whose entries are stamped. ``refs/tags`` is not listed (it
#: may hold thousands of refs): git updates a ref through a lock file and a
#: rename, which changes the stamp of the directory holding it.
_LISTED = ("refs", "refs/heads", "refs/remotes", "hooks", "info", "objects", "logs")


@dataclass(frozen=True, slots=True)
class GitFingerprint:
    """Stamps of the entries that make a git directory's state, by absolute path."""

    stamps: dict[str, Stamp] = field(default_factory=dict)


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _gitfile_target(path: str) -> str | None:
    """The directory a ``.git`` file names (``gitdir: X``), absolute; None if unreadable."""
    try:
        with open(path, "rb") as handle:
            line = handle.read(4096).split(b"\n", 1)[0].strip()
    except OSError:
        return None
    if not line.startswith(b"gitdir:"):
        return None
    target = os.fsdecode(line[len(b"gitdir:") :].strip())
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def git_dirs(root: str) -> list[str]:
    """The git directories a command in ``root`` may change, absolute paths.

    The repository holding the root (searched from the root upwards, as git
    does), its common directory for a worktree, and its submodules'.
    """
    found: list[str] = []
    here = root
    while True:
        dot = os.path.join(here, ".git")
        try:
            st = os.lstat(dot)
        except OSError:
            st = None
        if st is not None:
            if os.path.isdir(dot):
                found.append(dot)
            else:
                target = _gitfile_target(dot)
                if target is not None:
                    found.append(target)
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    if found:
        common = _common_dir(found[0])
        if common is not None and common != found[0]:
            found.append(common)
        base = found[-1]
        try:
            with os.scandir(os.path.join(base, "modules")) as listing:
                found += sorted(e.path for e in listing if e.is_dir(follow_symlinks=False))
        except OSError:
            pass
    return found


def _common_dir(git_dir: str) -> str | None:
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as handle:
            text = os.fsdecode(handle.read(4096).strip())
    except OSError:
        return None
    return os.path.normpath(os.path.join(git_dir, text)) if text else None


def _list(path: str, stamps: dict[str, Stamp], depth: int) -> None:
    """Stamp every entry of ``path``; go ``depth`` directories further down."""
    try:
        listing = os.scandir(path)
    except OSError:
        return
    with listing:
        for entry in listing:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            stamps[entry.path] = _stamp(st)
            if depth > 0 and entry.is_dir(follow_symlinks=False):
                _list(entry.path, stamps, depth - 1)


def _add_git_dir(git_dir: str, stamps: dict[str, Stamp]) -> None:
    try:
        stamps[git_dir] = _stamp(os.lstat(git_dir))
    except OSError:
        return
    _list(git_dir, stamps, 0)
    for name in _LISTED:
        _list(os.path.join(git_dir, name), stamps, 0)
    _list(os.path.join(git_dir, "worktrees"), stamps, 1)


def fingerprint(root: str) -> GitFingerprint:
    """The fingerprint of every git directory a command in ``root`` may change."""
    stamps: dict[str, Stamp] = {}
    for git_dir in git_dirs(root):
        _add_git_dir(git_dir, stamps)
    return GitFingerprint(stamps)


def changed(root: str, before: GitFingerprint, after: GitFingerprint) -> list[str]:
    """The entries that differ (added, removed or changed), relative to the root when under it.

    A directory that appeared or went stands for everything under it; one
    that changed only because an entry in it did is left out for that entry.
    """
    old, new = before.stamps, after.stamps
    keys = sorted(
        (k for k in old.keys() | new.keys() if old.get(k) != new.get(k)), key=lambda k: k.split("/")
    )
    out: list[str] = []
    for key in keys:
        if out and key.startswith(out[-1] + "/"):
            if out[-1] not in old or out[-1] not in new:
                continue  # under a directory that appeared or went: it says enough
            out.pop()  # the directory changed for this entry: the entry says more
        out.append(key)
    prefix = root.rstrip("/") + "/"
    return [k[len(prefix) :] if k.startswith(prefix) else k for k in out]


@dataclass(slots=True)
class GitChanges:
    """Filled when the ``noticing_git_changes`` block ends: what changed in git directories."""

    paths: list[str] = field(default_factory=list)


@contextmanager
def noticing_git_changes(root: str) -> Iterator[GitChanges]:
    """Fingerprint the git directories around a block; ``paths`` then lists what changed."""
    result = GitChanges()
    before = fingerprint(root)
    yield result
    result.paths = changed(root, before, fingerprint(root))
