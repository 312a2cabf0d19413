"""The user's git repository: the agent's tools never write it, and a command that does is named.

Each test runs the real ``earshot`` script (``cli``) in a real git repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(cli: Cli, git: Any) -> Cli:
    """The root is a git repository with one commit, and a session is started."""
    git(cli.root, "init", "-q")
    cli.write("a.txt", "a\n")
    git(cli.root, "add", "-A")
    git(cli.root, "commit", "-q", "-m", "first")
    cli.json("session", "new")  # no "started session" notice joins the error lines
    return cli


def _exec(cli: Cli, calls: list[dict[str, Any]], expect: int = 1) -> list[dict[str, Any]]:
    ran = cli.run("exec", stdin=json.dumps(calls), expect=expect)
    return [json.loads(line) for line in ran.stdout.splitlines()]


def test_write_of_git_head_is_refused_and_head_is_unchanged(
    repo: Cli, check_error: Any, dir_digest: Any
) -> None:
    before = dir_digest(repo.root / ".git")
    ran = repo.run("write", ".git/HEAD", stdin="ref: refs/heads/evil\n", expect=1)
    assert "inside .git" in check_error(ran)
    assert dir_digest(repo.root / ".git") == before


def test_edit_of_git_config_is_refused_and_config_is_unchanged(
    repo: Cli, check_error: Any, dir_digest: Any
) -> None:
    before = dir_digest(repo.root / ".git")
    ran = repo.run("edit", ".git/config", "--old", "bare = false", "--new", "bare = true", expect=1)
    assert "inside .git" in check_error(ran)
    assert dir_digest(repo.root / ".git") == before


def test_exec_write_of_a_git_hook_returns_ok_false_and_writes_nothing(
    repo: Cli, dir_digest: Any
) -> None:
    before = dir_digest(repo.root / ".git")
    (result,) = _exec(
        repo, [{"tool": "write_file", "path": ".git/hooks/post-checkout", "content": "x"}]
    )
    assert result["ok"] is False and "inside .git" in result["error"]
    assert dir_digest(repo.root / ".git") == before


@pytest.mark.parametrize("path", ["sub/.git/config", "sub/.git", "./x/../.git/HEAD"])
def test_write_into_any_git_component_is_refused(cli: Cli, path: str) -> None:
    """Any depth; a nested repository's too. (``x/../.git`` is refused as ``..``.)"""
    cli.write("sub/.git/config", "nested\n")
    (result,) = _exec(cli, [{"tool": "write_file", "path": path, "content": "x"}])
    assert result["ok"] is False
    assert "inside .git" in result["error"] or "outside the root" in result["error"]
    assert (cli.root / "sub/.git/config").read_text() == "nested\n"
    assert not (cli.root / ".git").exists()


def test_a_symlink_into_git_is_not_followed_for_a_write(repo: Cli, dir_digest: Any) -> None:
    (repo.root / "cfg").symlink_to(".git/config")
    before = dir_digest(repo.root / ".git")
    (result,) = _exec(repo, [{"tool": "write_file", "path": "cfg", "content": "[core]\n"}])
    assert result["ok"] is False and "into .git" in result["error"]
    assert dir_digest(repo.root / ".git") == before
    assert (repo.root / "cfg").is_symlink()


def test_write_into_the_data_directory_inside_the_root_is_refused(cli: Cli) -> None:
    home = cli.root / "earshot-data"
    env = cli.env(EARSHOT_HOME=str(home))
    cli.run("session", "new", env=env)
    store = next((home / "checkpoints").iterdir())
    target = f"earshot-data/checkpoints/{store.name}/data.mdb"
    before = (home / "checkpoints" / store.name / "data.mdb").read_bytes()
    ran = cli.run(
        "exec",
        "--json",
        stdin=json.dumps([{"tool": "write_file", "path": target, "content": "x"}]),
        env=env,
        expect=1,
    )
    (result,) = json.loads(ran.stdout)["results"]
    assert result["ok"] is False and "earshot's data directory" in result["error"]
    assert (home / "checkpoints" / store.name / "data.mdb").read_bytes()[:64] == before[:64]
    assert not list(home.rglob(".earshot-tmp-*"))


def test_bash_that_commits_says_git_changed_on_stderr_and_in_json(repo: Cli) -> None:
    repo.write("a.txt", "changed\n")
    ran = repo.run("bash", "git -c user.name=t -c user.email=t@e commit -qam second")
    notice = [line for line in ran.stderr.splitlines() if "git repository" in line]
    assert len(notice) == 1 and "undo does not take this back" in notice[0]
    assert ".git/refs/heads" in notice[0] or ".git/index" in notice[0]

    doc = repo.json("bash", "git tag v1")
    (result,) = doc["results"]
    assert result["git_changed"] == [".git/refs/tags"]


def test_bash_that_leaves_git_alone_says_nothing_of_it(repo: Cli) -> None:
    ran = repo.run("bash", "echo b > b.txt")
    assert "git" not in ran.stderr
    (result,) = repo.json("bash", "cat a.txt")["results"]
    assert result["git_changed"] == []


def test_exec_bash_that_writes_a_hook_reports_it_in_its_result(repo: Cli) -> None:
    (result,) = _exec(
        repo,
        [{"tool": "bash", "command": "printf '#!/bin/sh\\n' > .git/hooks/post-checkout"}],
        expect=0,
    )
    assert result["ok"] is True
    assert result["git_changed"] == [".git/hooks/post-checkout"]
    assert Path(repo.root / ".git/hooks/post-checkout").exists()  # the user's business
