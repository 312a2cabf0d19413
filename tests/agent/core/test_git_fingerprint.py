"""The git fingerprint: what a command changed in the user's git directories, by stat alone.

Real repositories made with real git; each change is made the way a shell
command would make it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.core.git_fingerprint import fingerprint, git_dirs, noticing_git_changes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path, git: Any) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def _changes(root: Path, act: Callable[[], object]) -> list[str]:
    with noticing_git_changes(str(root)) as seen:
        act()
    return seen.paths


def _sh(root: Path, command: str) -> Callable[[], object]:
    return lambda: subprocess.run(command, shell=True, cwd=root, check=True)


def test_a_work_tree_change_is_no_git_change(repo: Path) -> None:
    assert _changes(repo, _sh(repo, "echo b > a.txt; mkdir d; echo c > d/c.txt")) == []


def test_a_commit_names_the_ref_and_the_index(repo: Path, git: Any) -> None:
    (repo / "a.txt").write_text("changed\n")
    seen = _changes(repo, lambda: git(repo, "commit", "-q", "-am", "second"))
    assert any(p.startswith(".git/refs/heads/") for p in seen)
    assert ".git/index" in seen
    assert ".git/logs/HEAD" in seen


def test_files_written_in_place_are_seen(repo: Path) -> None:
    assert _changes(repo, _sh(repo, "echo '[x]' >> .git/config")) == [".git/config"]
    head = "echo 'ref: refs/heads/evil' > .git/HEAD"
    assert _changes(repo, _sh(repo, head)) == [".git/HEAD"]


def test_a_new_hook_and_its_chmod_are_seen(repo: Path) -> None:
    hook = ".git/hooks/post-checkout"
    assert _changes(repo, _sh(repo, f"printf '#!/bin/sh\\n' > {hook}")) == [hook]
    assert _changes(repo, _sh(repo, f"chmod +x {hook}")) == [hook]


def test_a_new_loose_object_is_seen_by_its_fan_out_directory(repo: Path, git: Any) -> None:
    (repo / "new.txt").write_text("content no object has yet\n")
    seen = _changes(repo, lambda: git(repo, "hash-object", "-w", "new.txt"))
    assert len(seen) == 1 and seen[0].startswith(".git/objects/")


def test_a_root_below_the_repository_finds_its_git_directory(repo: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    assert git_dirs(str(sub)) == [str(repo / ".git")]
    assert _changes(sub, _sh(sub, "echo '[y]' >> ../.git/config")) == [str(repo / ".git/config")]


def test_a_worktree_root_watches_its_own_and_the_common_git_directory(
    repo: Path, git: Any, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree), "-b", "side")
    dirs = git_dirs(str(tree))
    assert dirs == [str(repo / ".git/worktrees/tree"), str(repo / ".git")]
    (tree / "a.txt").write_text("side\n")
    seen = _changes(tree, lambda: git(tree, "commit", "-q", "-am", "side"))
    assert str(repo / ".git/worktrees/tree/index") in seen
    assert str(repo / ".git/refs/heads/side") in seen


def test_a_submodule_git_directory_is_watched(repo: Path, git: Any, tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q")
    (upstream / "u.txt").write_text("u\n")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "u")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "mod")
    assert str(repo / ".git/modules/mod") in git_dirs(str(repo))
    seen = _changes(repo, _sh(repo, "echo '[z]' >> .git/modules/mod/config"))
    assert seen == [".git/modules/mod/config"]


def test_no_repository_costs_nothing_and_sees_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    if git_dirs(str(plain)):  # pragma: no cover - a repository above the tmp directory
        pytest.skip("the tmp directory lies inside a git repository")
    assert fingerprint(str(plain)).stamps == {}
    assert os.listdir(plain) == []
