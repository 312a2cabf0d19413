"""The peer: "shadow git" checkpointing, as AI coding agents do it.

A git repository whose GIT_DIR lies outside the working tree (``GIT_WORK_TREE``
is the tree), so the project's own ``.git`` is never touched:

* checkpoint: ``git add -A`` then ``git commit --allow-empty --no-verify -q``;
* restore, variant 1 (index-only tools): ``git read-tree <commit>`` then
  ``git checkout-index -a -f``. This does NOT delete files the commit lacks,
  and it leaves the index without stat data, so every file is rewritten and
  the next ``git add -A`` re-reads the whole tree;
* restore, variant 2 (most agents): ``git reset --hard <commit>`` then
  ``git clean -fdq``, which also deletes untracked, non-ignored files.

Every git command runs with an isolated environment: ``GIT_CONFIG_NOSYSTEM=1``
and ``HOME``/``XDG_CONFIG_HOME`` pointing at a private temporary directory, so
neither the system's nor the user's configuration is read. Automatic ``gc``
and maintenance are turned off in the repository, so no background process
outlives a command and the store size is measured before any packing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

REPO_CONFIG = {
    "user.name": "Shadow Checkpoint",
    "user.email": "checkpoint@example.invalid",
    "commit.gpgsign": "false",
    "core.autocrlf": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
}


class GitError(RuntimeError):
    """A git command failed; carries its argv and stderr."""


def disk_usage(path: Path) -> int:
    """Bytes allocated on disk under ``path``, du-style: sum of ``st_blocks * 512``.

    Hard links are counted once; symlinks are not followed.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += st.st_blocks * 512
    return total + os.lstat(path).st_blocks * 512


class ShadowGit:
    """A shadow git repository at ``git_dir`` checkpointing the tree at ``tree``."""

    def __init__(self, tree: Path, git_dir: Path, home: Path | None = None) -> None:
        self.tree = tree.absolute()
        self.git_dir = git_dir.absolute()
        self._own_home = home is None
        self.home = home or Path(tempfile.mkdtemp(prefix="shadow-git-home-"))
        base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env = {
            **base,
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.tree),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }

    # -- plumbing ----------------------------------------------------------

    def git(self, *args: str) -> str:
        """Run one git command in the tree; return its stdout, raise GitError on failure."""
        argv = ["git", *args]
        proc = subprocess.run(
            argv, cwd=self.tree, env=self.env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise GitError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def head(self) -> str:
        """The commit HEAD points at, read from the ref file (no extra process)."""
        head = (self.git_dir / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = self.git_dir / head[5:]
            if ref.is_file():
                return ref.read_text().strip()
            return self.git("rev-parse", "HEAD").strip()
        return head

    # -- the checkpoint operations ----------------------------------------

    def init(self) -> None:
        """Create the repository (GIT_DIR outside the tree) and its local config."""
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "--initial-branch=main")
        for key, value in REPO_CONFIG.items():
            self.git("config", key, value)

    def snapshot(self, message: str = "checkpoint") -> str:
        """Stage everything (``add -A``, .gitignore honoured), commit; return the commit id."""
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "--allow-empty", "-m", message)
        return self.head()

    def restore(self, commit: str) -> None:
        """``read-tree <commit>`` + ``checkout-index -a -f``.

        Overwrites every tracked file with the commit's version. Files present
        in the tree but not in the commit are NOT deleted (that takes the
        ``reset --hard`` + ``clean`` variant). HEAD does not move.
        """
        self.git("read-tree", commit)
        self.git("checkout-index", "-a", "-f")

    def restore_reset_clean(self, commit: str) -> None:
        """``reset --hard <commit>`` + ``clean -fdq``: rewrites only what differs, deletes
        untracked non-ignored files; HEAD moves to ``commit``."""
        self.git("reset", "-q", "--hard", commit)
        self.git("clean", "-fdq")

    def disk_bytes(self) -> int:
        """Size of GIT_DIR on disk (du-style)."""
        return disk_usage(self.git_dir)

    # -- cleanup -------------------------------------------------------------

    def destroy(self) -> None:
        """Remove the repository (not the tree)."""
        shutil.rmtree(self.git_dir, ignore_errors=True)

    def close(self) -> None:
        """Remove the private HOME if this object made it."""
        if self._own_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> ShadowGit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
