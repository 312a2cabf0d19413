"""The root a command means when run below it, found as git finds its work tree.

From a folder of the project, undo, log and snapshot act on the project's
root (its git top, its ``.earshotignore``, or the store earshot keeps for
it) and create nothing for the folder. ``/`` and the home directory are
taken only when ``--root`` names them. Every test runs in-process and
through the root's daemon.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from earshot_cli import Cli

pytestmark = pytest.mark.both_modes


def _stores(cli: Cli) -> list[str]:
    top = cli.home / "checkpoints"
    return sorted(p.name for p in top.iterdir()) if top.exists() else []


def test_undo_in_a_folder_of_a_git_project_undoes_the_project_s_batch(cli: Cli, root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    sub = root / "cli"
    sub.mkdir()
    sid = cli.new_session()
    cli.run("bash", "echo made > made.txt", session=sid)
    stores = _stores(cli)
    doc = cli.json("log", session=sid, cwd=sub)
    assert [b["seq"] for b in doc["batches"]] == [1]
    cli.run("undo", session=sid, cwd=sub)
    assert not (root / "made.txt").exists()
    assert _stores(cli) == stores  # nothing made for the folder


def test_a_folder_of_a_project_earshot_recorded_finds_it_by_its_store(cli: Cli, root: Path) -> None:
    # No git, no .earshotignore: the store earshot keeps for the root marks it.
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    cli.write("a.txt", "a\n")
    first = cli.snap()
    assert [s["id"] for s in cli.json("snapshots", cwd=sub)["snapshots"]] == [first]
    assert len(_stores(cli)) == 1


def test_the_home_directory_is_refused_unless_named(cli: Cli, tmp_path: Path) -> None:
    home = tmp_path / "person"
    home.mkdir()
    (home / "a.txt").write_text("a\n")
    env = cli.env(HOME=str(home))
    stores = _stores(cli)
    ran = cli.run("snapshot", cwd=home, env=env, expect=1)
    assert "is your home directory" in ran.stderr and "--root" in ran.stderr, ran.stderr
    assert _stores(cli) == stores
    named = cli.json("snapshot", "--root", str(home), cwd=home, env=env)
    assert named["files"] == 1


def test_the_file_system_s_root_is_refused_before_anything_is_read(cli: Cli) -> None:
    stores = _stores(cli)
    ran = cli.run("snapshot", cwd=Path("/"), expect=1)
    assert "/ is the file system's root" in ran.stderr, ran.stderr
    assert _stores(cli) == stores
    ran = cli.run("watch", cwd=Path("/"), expect=1)
    assert "/ is the file system's root" in ran.stderr, ran.stderr
