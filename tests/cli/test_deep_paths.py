"""Trees deeper than earshot records (``scan.MAX_DEPTH``): kept, never walked, never lost.

A path of a thousand components is shorter than PATH_MAX; every walk over
trees recurses a few frames a level, so a tree that deep once ended every
later command in a RecursionError.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from earshot_cli import EARSHOT, Cli

from earshot.cas.recording import MAX_DEPTH


def deep(root: Path, levels: int, name: str = "d") -> Path:
    path = root.joinpath(*[name] * levels)
    path.mkdir(parents=True)
    (path / "f.txt").write_text("deep\n")
    return path


def test_a_tree_deeper_than_recorded_is_kept_and_what_is_recorded_comes_back(
    cli: Cli, root: Path
) -> None:
    bottom = deep(root, 300)
    (root / "top.txt").write_text("top\n")
    shallow = deep(root, MAX_DEPTH - 2, "s")
    snap = cli.run("snapshot")
    assert f"more than {MAX_DEPTH} levels deep, not recorded" in snap.stdout
    cli.run("bash", "rm -rf s top.txt")
    undone = cli.run("undo")
    assert (shallow / "f.txt").read_text() == "deep\n"  # within the limit: recorded
    assert (root / "top.txt").read_text() == "top\n"
    assert (bottom / "f.txt").read_text() == "deep\n"  # never touched
    assert "kept" not in undone.stdout
    assert cli.run("fsck").rc == 0


def test_undo_never_deletes_what_lay_below_the_limit(cli: Cli, root: Path) -> None:
    cli.run("snapshot")
    cli.run("bash", f"mkdir -p {'/'.join(['d'] * 200)} && echo x > {'/'.join(['d'] * 200)}/f")
    cli.run("undo", expect=3)
    # The part earshot could not record is kept, and said to be kept.
    assert (root.joinpath(*["d"] * 200) / "f").read_text() == "x\n"


def test_a_write_deeper_than_recorded_is_refused_in_words(cli: Cli, root: Path) -> None:
    path = "/".join(["w"] * (MAX_DEPTH + 5)) + "/x.txt"
    ran = cli.run("write", path, stdin="x\n", expect=1)
    assert f"more than {MAX_DEPTH} directories deep" in ran.stderr
    assert not (root / "w").exists()


def test_an_agent_s_deep_write_and_its_death_leave_the_root_usable(cli: Cli, root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    payload = {
        "session_id": "s1",
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_use_id": "t1",
        "tool_input": {"file_path": str(root / ("d/" * 990)) + "x", "content": "x"},
    }
    # The "agent" is a process that runs the hook, then dies.
    agent = (
        "import subprocess, sys; "
        "done = subprocess.run(['/bin/sh', '-c', sys.argv[1]], input=sys.argv[2].encode(), "
        "capture_output=True); "
        "sys.exit(done.returncode or len(done.stdout))"
    )
    hook = subprocess.run(
        [sys.executable, "-c", agent, f"{EARSHOT} hook claude", json.dumps(payload)],
        cwd=root,
        env=cli.env(),
        check=False,
    )
    assert hook.returncode == 0
    ran = cli.run("bash", "echo hi > b.txt")
    assert "recorded interrupted batch 1" in ran.stderr
    cli.run("undo")
    assert not (root / "b.txt").exists() and os.listdir(root) == ["a.txt"]
