"""Finding git repositories on disk, without git: where a work tree's index is.

A directory is the top of a work tree when it holds ``.git``: a directory
(an ordinary repository) or a file reading ``gitdir: PATH`` (a linked
worktree, a submodule), PATH relative to that file. The git dir holds the
index; a linked worktree's ``commondir`` file names the repository it
shares ``config`` and ``info/exclude`` with. Nothing here writes, and no
environment variable (``GIT_DIR``, ``GIT_INDEX_FILE``) is read: a
snapshot must not depend on who takes it.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Final

GIT: Final = ".git"
# The first line of a gitfile; git itself reads no more of it.
_GITFILE_MAX: Final = 4096
_SHA256: Final = re.compile(rb"^\s*objectformat\s*=\s*sha256\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class GitRepo:
    """One work tree: its top directory, its git dir and the repository they share."""

    top: str
    git_dir: str
    common_dir: str

    @property
    def index_path(self) -> str:
        return os.path.join(self.git_dir, "index")

    @property
    def exclude_path(self) -> str:
        return os.path.join(self.common_dir, "info", "exclude")

    def digest_size(self) -> int:
        """Bytes per object name in the index: 32 in a sha256 repository, else 20."""
        try:
            with open(os.path.join(self.common_dir, "config"), "rb") as f:
                config = f.read(1 << 20)
        except OSError:
            return 20
        return 32 if _SHA256.search(config) else 20


def _gitfile_target(path: str, directory: str) -> str | None:
    try:
        with open(path, "rb") as f:
            first = f.read(_GITFILE_MAX).split(b"\n", 1)[0].strip()
    except OSError:
        return None
    if not first.startswith(b"gitdir:"):
        return None
    target = os.fsdecode(first[len(b"gitdir:") :].strip())
    return os.path.normpath(os.path.join(directory, target)) if target else None


def repo_at(directory: str) -> GitRepo | None:
    """The work tree whose top is ``directory``, if it holds a usable ``.git``."""
    marker = os.path.join(directory, GIT)
    try:
        st = os.stat(marker)  # git follows a symlinked .git too
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        git_dir: str | None = marker
    elif stat.S_ISREG(st.st_mode):
        git_dir = _gitfile_target(marker, directory)
    else:
        git_dir = None
    if git_dir is None:
        return None
    common = git_dir
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as f:
            named = os.fsdecode(f.read(_GITFILE_MAX).strip())
        if named:
            common = os.path.normpath(os.path.join(git_dir, named))
    except OSError:
        pass
    return GitRepo(directory, git_dir, common)


def enclosing_repo(path: str) -> GitRepo | None:
    """The work tree holding ``path`` (absolute, real): ``path`` itself or its nearest parent."""
    directory = path
    while True:
        repo = repo_at(directory)
        if repo is not None:
            return repo
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
