"""The peers: each way of checkpointing a tree, behind one small adapter.

A peer works on its own copy of a tree, with its store outside the tree:

* ``earshot``: the ``earshot`` console script, snapshot and restore;
* ``shadow-git``: as Cline and Gemini CLI run it, ``add -A`` + ``commit``;
  restore by ``reset --hard`` + ``clean -fd``;
* ``opencode``: OpenCode's way, ``add .`` + ``write-tree``; restore by
  ``read-tree`` + ``checkout-index -a -f``;
* ``git-tuned``: shadow git tuned as well as this git allows
  (``feature.manyFiles``, the untracked cache, and ``core.fsmonitor`` with
  git's own daemon where the git version has it on this platform);
* ``file-backups`` (peers/file_backups.py): per-file copies of what Write
  and Edit touch, as Claude Code keeps them; it has no snapshot of the tree,
  so it takes part in the per-call and fidelity figures only.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.peers.base import Checkpointer
from benchmarks.peers.earshot import EarshotPeer
from benchmarks.peers.git import GIT_PEERS, GitPeer

SNAPSHOT_PEERS = ("earshot", *GIT_PEERS)

__all__ = ["GIT_PEERS", "SNAPSHOT_PEERS", "Checkpointer", "EarshotPeer", "GitPeer", "make"]


def make(name: str, tree: Path, store: Path, earshot: str) -> Checkpointer:
    """The peer called ``name`` on ``tree``, its store under ``store``."""
    if name == "earshot":
        return EarshotPeer(earshot, tree, store)
    return GitPeer(name, tree, store)
