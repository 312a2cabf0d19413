"""git as agents run it for checkpoints, in three flavours.

Every flavour keeps its repository outside the tree (``GIT_DIR`` elsewhere,
``GIT_WORK_TREE`` the tree), so the project's own ``.git`` is never touched,
and runs git with no system or user configuration. Automatic gc is off so no
background process outlives a command; ``gc()`` is the explicit one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from benchmarks.peers.base import disk_usage

GIT_PEERS = ("shadow-git", "opencode", "git-tuned")

BASE_CONFIG = {
    "user.name": "Shadow Checkpoint",
    "user.email": "checkpoint@example.invalid",
    "commit.gpgsign": "false",
    "core.autocrlf": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
}
# The strongest git: an index of version 4 without its trailing hash, and
# the untracked cache (both are what feature.manyFiles sets), plus the
# untracked cache asked for by name in case the feature's set changes.
TUNED_CONFIG = {
    "feature.manyFiles": "true",
    "core.untrackedCache": "true",
    "index.skipHash": "true",
}


class GitError(RuntimeError):
    """A git command failed; carries its argv and stderr."""


def fsmonitor_available() -> bool:
    """Whether this git has its own file-system monitor daemon on this platform
    (git 2.39 on Linux says "not supported on this platform")."""
    proc = subprocess.run(
        ["git", "fsmonitor--daemon", "status"], capture_output=True, text=True, check=False
    )
    return "not supported" not in (proc.stderr + proc.stdout)


def git_version() -> tuple[int, ...]:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(p) for p in found.groups()) if found else (0,)


class GitPeer:
    """Shadow git (``shadow-git``), OpenCode's way (``opencode``), or tuned (``git-tuned``)."""

    def __init__(self, name: str, tree: Path, store: Path) -> None:
        if name not in GIT_PEERS:
            raise ValueError(f"not a git peer: {name}")
        self.name = name
        self.tree = tree.absolute()
        self.store = store.absolute()
        self.home = self.store / "home"
        self.generation = 0
        self.git_dir = self.store / "git-0"
        self.fsmonitor = name == "git-tuned" and fsmonitor_available()

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        return {
            **base,
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.tree),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }

    def git(self, *args: str) -> str:
        """One git command in the tree; its stdout."""
        argv = ["git", *args]
        proc = subprocess.run(
            argv, cwd=self.tree, env=self.env, capture_output=True, text=True, check=False
        )
        if proc.returncode:
            raise GitError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def init(self) -> None:
        self.stop_daemon()
        self.generation += 1
        self.git_dir = self.store / f"git-{self.generation}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "--initial-branch=main")
        config = dict(BASE_CONFIG)
        if self.name == "git-tuned":
            config.update(TUNED_CONFIG)
            if self.fsmonitor:
                config["core.fsmonitor"] = "true"
        for key, value in config.items():
            self.git("config", key, value)

    def snapshot(self) -> str:
        if self.name == "opencode":
            self.git("add", ".")
            return self.git("write-tree").strip()
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "--allow-empty", "-m", "checkpoint")
        return self.git("rev-parse", "HEAD").strip()

    def restore(self, ref: str) -> None:
        if self.name == "opencode":
            # Files the checkpoint lacks stay; read-tree leaves the index
            # without stat data, so every file is rewritten.
            self.git("read-tree", ref)
            self.git("checkout-index", "-a", "-f")
        else:
            self.git("reset", "-q", "--hard", ref)
            self.git("clean", "-fdq")

    def gc(self) -> None:
        self.git("gc", "-q", "--prune=now")

    def store_bytes(self) -> int:
        return disk_usage(self.git_dir)

    def stop_daemon(self) -> None:
        if self.fsmonitor and self.git_dir.exists():
            subprocess.run(
                ["git", "fsmonitor--daemon", "stop"],
                cwd=self.tree,
                env=self.env,
                capture_output=True,
                check=False,
            )

    def destroy(self) -> None:
        self.stop_daemon()
        shutil.rmtree(self.store, ignore_errors=True)
