"""Issue 9, items 2 and 5: what undo holds, what it does not, and empty directories.

The ledger tells "absent" from "present but not recorded" (over the size
limit, a FIFO): undo never deletes or overwrites a path whose state before it
does not hold. Explicit write targets are recorded whatever the ignore rules
say. Undo brings back empty directories a command removed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Picture = Callable[[Path], dict[str, tuple[object, ...]]]


def test_undo_never_deletes_a_file_over_the_limit_that_it_did_not_record(
    cli: Any, root: Path
) -> None:
    (root / "big").write_bytes(os.urandom(4096))
    sid = cli.new_session()
    env = cli.env(sid, EARSHOT_MAX_FILE_SIZE="1K")
    doc = cli.run("bash", "echo tiny > big", "--json", session=sid, env=env).json()
    (line,) = doc["changes"]
    assert line["before_kind"] == "unrecorded" and line["after_kind"] == "file"
    undo = cli.run("undo", "--json", session=sid, env=env, expect=3).json()
    assert undo["deleted"] == [] and undo["restored"] == []
    assert [k["path"] for k in undo["kept"]] == ["big"]
    assert "not recorded" in undo["kept"][0]["reason"]
    assert (root / "big").read_text() == "tiny\n"  # left as it is, never deleted


def test_undo_never_deletes_a_file_that_replaced_a_fifo(cli: Any, root: Path) -> None:
    os.mkfifo(root / "pipe")
    sid = cli.new_session()
    cli.run("bash", "rm pipe; echo data > pipe", session=sid)
    undo = cli.run("undo", "--json", session=sid, expect=3).json()
    assert [k["path"] for k in undo["kept"]] == ["pipe"]
    assert (root / "pipe").read_text() == "data\n"


def test_a_write_of_an_ignored_file_is_recorded_and_undone(cli: Any, root: Path) -> None:
    (root / ".gitignore").write_text(".env\nbuild/\n")
    (root / ".env").write_text("KEY=1\n")
    sid = cli.new_session()
    doc = cli.run("write", ".env", "--json", stdin="KEY=2\n", session=sid).json()
    assert [c["path"] for c in doc["changes"]] == [".env"]
    doc = cli.run("write", "build/out.txt", "--json", stdin="made\n", session=sid).json()
    assert [c["path"] for c in doc["changes"]] == ["build/out.txt"]
    cli.run("undo", "2", session=sid)
    assert (root / ".env").read_text() == "KEY=1\n"
    assert not (root / "build" / "out.txt").exists()


def test_a_write_over_the_size_limit_is_recorded_past_it_and_undone(cli: Any, root: Path) -> None:
    # What a write names is recorded whatever the limit: before and after.
    (root / "data.bin").write_text("small\n")
    sid = cli.new_session()
    env = cli.env(sid, EARSHOT_MAX_FILE_SIZE="1K")
    ran = cli.run("write", "data.bin", "--json", stdin="x" * 4096, session=sid, env=env)
    (result,) = ran.json()["results"]
    assert result["ok"] and "warning" not in result
    cli.run("write", "data.bin", stdin="y" * 4096, session=sid, env=env)
    cli.run("undo", session=sid, env=env)
    assert (root / "data.bin").read_text() == "x" * 4096
    cli.run("undo", session=sid, env=env)
    assert (root / "data.bin").read_text() == "small\n"


def test_a_write_over_a_file_above_the_limit_records_it_first_so_undo_brings_it_back(
    cli: Any, root: Path
) -> None:
    big = os.urandom(5000)
    (root / "big").write_bytes(big)
    sid = cli.new_session()
    env = cli.env(sid, EARSHOT_MAX_FILE_SIZE="1K")
    cli.run("snapshot", env=env)  # "big" is listed as not recorded: over the limit
    calls = '[{"tool": "write_file", "path": "big", "content": "tiny"}]'
    (result,) = [
        json.loads(line) for line in cli.run("exec", "-", stdin=calls, env=env).stdout.splitlines()
    ]
    assert result["ok"] and "warning" not in result, result
    cli.run("undo", session=sid, env=env)
    assert (root / "big").read_bytes() == big


def test_undo_recreates_the_empty_directories_a_command_removed(
    cli: Any, root: Path, tree: Picture
) -> None:
    (root / "d" / "empty").mkdir(parents=True)
    (root / "d" / "sub").mkdir()
    (root / "d" / "f").write_text("f\n")
    (root / "d" / "sub" / "g").write_text("g\n")
    (root / "d" / "empty").chmod(0o750)
    before = tree(root)
    sid = cli.new_session()
    cli.run("bash", "rm -rf d", session=sid)
    cli.run("undo", session=sid)
    assert tree(root) == before
    cli.run("redo", session=sid)
    assert not (root / "d").exists()


def test_undo_removes_an_empty_directory_a_command_made(cli: Any, root: Path) -> None:
    sid = cli.new_session()
    cli.run("bash", "mkdir -p made/inner", session=sid)
    cli.run("undo", session=sid)
    assert not (root / "made").exists()


def test_changes_made_while_another_session_ran_are_ambiguous_and_never_deleted(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    import subprocess
    import time

    s1, s2 = cli.new_session(), cli.new_session()
    started, go = tmp_path / "s1-started", tmp_path / "s2-done"
    slow = subprocess.Popen(
        [
            str(Path(os.sys.executable).parent / "earshot"),
            "bash",
            # It runs on until S2's batch is done: the two overlap, however
            # slowly a loaded machine starts the second.
            f"echo A > a1; touch {started}; while [ ! -e {go} ]; do sleep 0.01; done; echo A2 > a2",
        ],
        cwd=root,
        env=cli.env(s1),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not started.exists():
        assert time.monotonic() < deadline and slow.poll() is None, "S1's batch never started"
        time.sleep(0.01)
    cli.run("bash", "echo B > b1", session=s2)
    go.touch()
    assert slow.wait(timeout=120) == 0
    one = cli.run("log", "--json", session=s1).json()["batches"][0]
    assert {c["path"] for c in one["changes"] if c["ambiguous"]} >= {"b1"}
    undo = cli.run("undo", "--json", session=s1, expect=3).json()
    assert "b1" in undo["ambiguous"] and "b1" in undo["conflicts"]
    assert (root / "b1").read_text() == "B\n"  # S2's file: never deleted by S1's undo
    two = cli.run("undo", "--json", session=s2, expect=3).json()
    assert "b1" in two["ambiguous"]
    assert (root / "b1").exists()
    cli.run("undo", "--force", session=s1)  # asked for: the creations go
    assert not (root / "a1").exists() and not (root / "a2").exists()


@pytest.mark.parametrize("rule", [".gitignore", ".earshotignore"])
def test_redo_brings_back_a_hand_edit_to_a_file_ignored_since(
    cli: Any, root: Path, rule: str
) -> None:
    # undo --force overwrites the hand edit; the undo's own record holds it
    # (forced, though the rules now keep the file as existence only: ignored
    # and over the limit for ignored files, or excluded), before and after.
    limit = {"EARSHOT_IGNORED_MAX_FILE": "4"}
    (root / ".env").write_text("OLD=1\n")
    sid = cli.new_session()
    env = cli.env(sid, **limit)
    cli.run("bash", "echo MID=2 > .env", session=sid, env=env)
    (root / rule).write_text(".env\n")
    (root / ".env").write_text("NEW=precious\n")
    cli.run("undo", "--force", session=sid, env=env)
    assert (root / ".env").read_text() == "OLD=1\n"
    undo = cli.json("log", session=sid, env=env)["batches"][-1]
    (line,) = undo["changes"]
    assert line["path"] == ".env" and line["after_kind"] == "file"  # held, not "absent"
    cli.run("redo", session=sid, env=env)  # no conflict: the disk holds what the undo left
    assert (root / ".env").read_text() == "NEW=precious\n"


def test_undo_force_never_deletes_or_overwrites_what_it_does_not_hold_now(
    cli: Any, root: Path
) -> None:
    # The batch made f; since, the person put a FIFO there: earshot cannot
    # hold it, so even --force leaves it, and says why.
    sid = cli.new_session()
    cli.run("bash", "echo made > f; echo made > g", session=sid)
    (root / "f").unlink()
    os.mkfifo(root / "f")
    (root / "g").write_text("edited\n")
    undo = cli.run("undo", "--force", "--json", session=sid, expect=3).json()
    assert [k["path"] for k in undo["kept"]] == ["f"]
    assert "its content now is not recorded" in undo["kept"][0]["reason"]
    assert (root / "f").is_fifo()
