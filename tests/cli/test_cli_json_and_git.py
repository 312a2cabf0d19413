"""stdout is one JSON document for every --json command; the user's .git is never touched."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
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
    # An interrupted restore: every command but restore prints a notice on stderr.
    journal = {"target": a, "tag": "feedfacecafe", "started_ns": time.time_ns(), "dirs": []}
    (es.store_dir() / "restore.journal").write_text(json.dumps(journal))
    es.write("a.txt", "a2\n")
    es.write("b.txt", "b2\n")
    es.write("extra.txt", "extra\n")

    runs: list[Result] = []

    def run(*args: str, expect: int = 0) -> Any:
        result = es.run(*args, "--json", "-vv", expect=expect)
        runs.append(result)
        return result.json()

    b = run("snapshot", "-m", "b")["id"]
    run("snapshot", "a.txt")
    run("snapshots")
    run("diff", a)
    run("diff", a, b)
    run("stats")
    run("fsck")
    noticed = [r for r in runs if "interrupted" in r.stderr]
    assert len(noticed) == len(runs), "every command reports the interrupted restore"
    run("restore", a, "--dry-run", expect=3)
    run("restore", a, expect=3)
    run("restore", b, "--force")
    run("forget", a)
    run("gc")
    for result in runs:
        assert result.stdout.lstrip().startswith("{"), str(result)
    # The fifo survived everything, restore --force included.
    assert (es.root / "fifo").is_fifo()


def _git(root: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "LC_ALL": "C",
    }
    proc = subprocess.run(
        ["git", "--no-optional-locks", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


def _hash_tree(top: Path) -> dict[str, str]:
    """Every entry under ``top``: path -> kind, mode and a digest of its bytes."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = f"link {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode:o}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = f"file {st.st_mode:o} {st.st_mtime_ns} {digest}"
    return out


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_snapshot_modify_restore_force_leaves_git_untouched(es: Earshot, list_tree: Any) -> None:
    root = es.root
    _git(root, "init", "-q")
    es.write(".gitignore", "build/\n")
    es.write("src/main.py", "print('hi')\n")
    es.write("README", "readme\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    es.write("build/out.o", "ignored build output\n")
    status_before = _git(root, "status", "--porcelain", "--ignored")
    git_before = _hash_tree(root / ".git")

    snap_id = es.snap()
    tracked = {k: v for k, v in list_tree(root).items() if not k.startswith((".git/", "build/"))}
    es.write("src/main.py", "print('changed')\n")
    es.write("src/new.py", "new\n")
    (root / "README").unlink()
    es.write("build/out.o", "rebuilt\n")  # ignored: never restored, never deleted
    es.json("restore", snap_id, "--force")

    assert _hash_tree(root / ".git") == git_before
    after = {k: v for k, v in list_tree(root).items() if not k.startswith((".git/", "build/"))}
    assert after == tracked
    assert (root / "build/out.o").read_text() == "rebuilt\n"
    es.write("build/out.o", "ignored build output\n")
    assert _git(root, "status", "--porcelain", "--ignored") == status_before
    assert ".git" not in {c["path"].split("/")[0] for c in es.json("diff", snap_id)["changes"]}
