"""stdout is one JSON document for every --json command; the user's .git is never touched."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Earshot, Result


def test_every_json_command_prints_one_document_even_with_notices_on_stderr(
    es: Earshot,
) -> None:
    es.write("a.txt", "a\n")
    es.write("b.txt", "b\n")
    os.mkfifo(es.root / "fifo")  # never recorded: listed as not recorded
    first = es.json("snapshot", "-vv")
    assert [u["path"] for u in first["unrecorded_paths"]] == ["fifo"]
    a = first["id"]
    es.write("a.txt", "a2\n")
    es.write("b.txt", "b2\n")
    es.write("extra.txt", "extra\n")
    b0 = es.json("snapshot")["id"]
    # An interrupted restore: readers report it on stderr, the next writer finishes it.
    killed = es.run("restore", a, expect=None, env=es.env(EARSHOT_FAULTS="restore-rename"))
    assert killed.rc == -9, str(killed)

    runs: list[Result] = []

    def run(*args: str, expect: int = 0) -> Any:
        result = es.run(*args, "--json", "-vv", expect=expect)
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
    es.write("a.txt", "a2\n")
    run("snapshot", "a.txt")
    run("restore", a, "--dry-run", expect=3)
    run("restore", a, expect=3)
    run("restore", b, "--force")
    run("forget", a)
    run("gc")
    for result in runs:
        assert result.stdout.lstrip().startswith("{"), str(result)
    # The fifo survived everything, restore --force included.
    assert (es.root / "fifo").is_fifo()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_snapshot_modify_restore_force_leaves_git_untouched(
    es: Earshot, list_tree: Any, git: Any, dir_digest: Any
) -> None:
    root = es.root
    git(root, "init", "-q")
    es.write(".gitignore", "build/\n")
    es.write("src/main.py", "print('hi')\n")
    es.write("README", "readme\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    es.write("build/out.o", "ignored build output\n")
    status_before = git(root, "status", "--porcelain", "--ignored")
    git_before = dir_digest(root / ".git")

    snap_id = es.snap()
    tracked = {k: v for k, v in list_tree(root).items() if not k.startswith((".git/", "build/"))}
    es.write("src/main.py", "print('changed')\n")
    es.write("src/new.py", "new\n")
    (root / "README").unlink()
    es.write("build/out.o", "rebuilt\n")  # ignored: never restored, never deleted
    es.json("restore", snap_id, "--force")

    assert dir_digest(root / ".git") == git_before
    after = {k: v for k, v in list_tree(root).items() if not k.startswith((".git/", "build/"))}
    assert after == tracked
    assert (root / "build/out.o").read_text() == "rebuilt\n"
    es.write("build/out.o", "ignored build output\n")
    assert git(root, "status", "--porcelain", "--ignored") == status_before
    assert ".git" not in {c["path"].split("/")[0] for c in es.json("diff", snap_id)["changes"]}
