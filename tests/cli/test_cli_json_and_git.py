"""stdout is one JSON document for every --json command; the user's .git is never touched."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli, Ran


def test_every_json_command_prints_one_document_even_with_notices_on_stderr(
    cli: Cli,
) -> None:
    cli.write("a.txt", "a\n")
    cli.write("b.txt", "b\n")
    os.mkfifo(cli.root / "fifo")  # never recorded: listed as not recorded
    first = cli.json("snapshot", "-vv")
    assert [u["path"] for u in first["unrecorded_paths"]] == ["fifo"]
    a = first["id"]
    cli.write("a.txt", "a2\n")
    cli.write("b.txt", "b2\n")
    cli.write("extra.txt", "extra\n")
    b0 = cli.json("snapshot")["id"]
    # An interrupted restore: readers report it on stderr, the next writer finishes it.
    killed = cli.run("restore", a, expect=None, env=cli.env(EARSHOT_FAULTS="restore-rename"))
    assert killed.rc == -9, str(killed)

    runs: list[Ran] = []

    def run(*args: str, expect: int = 0) -> Any:
        result = cli.run(*args, "--json", "-vv", expect=expect)
        runs.append(result)
        return result.json()

    run("snapshots")
    run("diff", a)
    run("diff", a, b0)
    run("stats")
    run("fsck")
    b = run("snapshot", "-m", "b")["id"]
    noticed = [r for r in runs if "interrupted" in r.stderr]
    assert len(noticed) == len(runs), "every command reports the interrupted restore"
    assert "finished an interrupted restore" in runs[-1].stderr
    cli.write("a.txt", "a2\n")
    run("snapshot", "a.txt")
    run("restore", a, "--dry-run", expect=3)
    run("restore", a, expect=3)
    run("restore", b, "--force")
    run("forget", a)
    run("gc")
    for result in runs:
        assert result.stdout.lstrip().startswith("{"), str(result)
    # The fifo survived everything, restore --force included.
    assert (cli.root / "fifo").is_fifo()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_snapshot_modify_restore_force_leaves_git_untouched(
    cli: Cli, tree: Any, git: Any, dir_digest: Any
) -> None:
    root = cli.root
    git(root, "init", "-q")
    cli.write(".gitignore", "build/\n")
    cli.write("src/main.py", "print('hi')\n")
    cli.write("README", "readme\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    cli.write("build/out.o", "ignored build output\n")
    status_before = git(root, "status", "--porcelain", "--ignored")
    git_before = dir_digest(root / ".git")

    snap_id = cli.snap()
    tracked = {k: v for k, v in tree(root).items() if not k.startswith((".git/", "build/"))}
    cli.write("src/main.py", "print('changed')\n")
    cli.write("src/new.py", "new\n")
    (root / "README").unlink()
    cli.write("build/out.o", "rebuilt\n")  # ignored: never restored, never deleted
    cli.json("restore", snap_id, "--force")

    assert dir_digest(root / ".git") == git_before
    after = {k: v for k, v in tree(root).items() if not k.startswith((".git/", "build/"))}
    assert after == tracked
    assert (root / "build/out.o").read_text() == "rebuilt\n"
    cli.write("build/out.o", "ignored build output\n")
    assert git(root, "status", "--porcelain", "--ignored") == status_before
    assert ".git" not in {c["path"].split("/")[0] for c in cli.json("diff", snap_id)["changes"]}
