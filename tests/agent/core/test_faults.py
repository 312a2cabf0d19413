"""I/O faults at every commit of the store, and in the tree during restore and undo.

An injected EIO (or ENOSPC) at the Nth commit of a command, for every N the
command reaches: a one-line error or success, never a traceback; a store fsck
accepts; nothing lost; no change recorded as "nothing"; the next command
finishes whatever was left, and undo then restores the state before exactly.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Picture = Callable[[Path], dict[str, tuple[object, ...]]]

#: Commits each command makes here, at most (measured: write 3, bash 4, undo 2).
MAX_COMMITS = 6


def _one_line_or_ok(ran: Any) -> None:
    assert "Traceback" not in ran.stderr, str(ran)
    assert ran.rc in (0, 1), str(ran)
    if ran.rc == 1:
        errors = [line for line in ran.stderr.splitlines() if line.startswith("earshot: ")]
        assert errors and "Input/output error" in ran.stderr, str(ran)


@pytest.mark.parametrize("nth", range(1, MAX_COMMITS + 1))
@pytest.mark.parametrize("command", ["write", "bash", "undo", "redo"])
def test_an_io_error_at_any_commit_loses_nothing_and_records_no_change_as_nothing(
    cli: Any, root: Path, tree: Picture, command: str, nth: int
) -> None:
    (root / "keep.txt").write_text("keep\n")
    (root / "gone.txt").write_text("gone\n")
    sid = cli.new_session()
    pristine = tree(root)
    args: tuple[str, ...]
    stdin = None
    if command == "write":
        args, stdin = ("write", "keep.txt"), "changed\n"
    elif command == "bash":
        args = ("bash", "rm gone.txt; echo new > new.txt; echo more >> keep.txt")
    else:
        cli.run("bash", "rm gone.txt; echo new > new.txt", session=sid)
        if command == "redo":
            cli.run("undo", session=sid)
        args = (command,)
    start = tree(root)
    ran = cli.run(
        *args,
        stdin=stdin,
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS=f"store-commit@{nth}=eio"),
    )
    fired = "earshot-fault: store-commit" in ran.stderr
    _one_line_or_ok(ran)
    assert cli.run("fsck").rc == 0
    # The next command that changes files finishes what was left; nothing pending.
    cli.run("snapshot", session=sid)
    log = cli.json("log", session=sid)
    assert log["pending"] == []
    changed = tree(root) != start
    if command in ("write", "bash") and changed:
        # The change happened: some batch says so (never "changed nothing").
        assert any(b["changes"] for b in log["batches"] if b["kind"] == "calls"), log
    if command in ("undo", "redo") and fired and not changed:
        assert ran.rc == 1  # refused before it touched anything, and said so
    # Whatever happened, undoing every batch brings the start back, but for what
    # undo keeps, and says so: a creation no note proves a call made (the state
    # after the command could not be stored, so nothing ties it to the command).
    kept: set[str] = set()
    while True:
        undone = cli.run("undo", "--json", session=sid, expect=None)
        if undone.rc == 1:
            assert "nothing to undo" in undone.stderr, str(undone)
            break
        assert undone.rc in (0, 3), str(undone)
        kept |= {k["path"] for k in undone.json()["kept"]}
    now = tree(root)
    assert {p: e for p, e in now.items() if p not in kept} == pristine
    assert all(p not in pristine for p in kept)


@contextlib.contextmanager
def _small_disk(path: Path, kilobytes: int) -> Iterator[bool]:
    path.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={kilobytes}k", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_tree_during_restore_skips_what_does_not_fit_and_a_retry_converges(
    cli: Any, tmp_path: Path, tree: Picture
) -> None:
    with _small_disk(tmp_path / "tree", 1024) as mounted:
        root = tmp_path / "tree" / "root"
        root.mkdir()
        cli = type(cli)(cli.home, root)
        (root / "a.txt").write_text("a\n")
        (root / "big.bin").write_bytes(b"b" * 600_000)
        snap = cli.json("snapshot")["id"]
        wanted = tree(root)
        (root / "big.bin").unlink()
        (root / "other.bin").write_bytes(b"o" * 600_000)  # the disk is now nearly full
        env = cli.env() if mounted else cli.env(EARSHOT_FAULTS="restore-rename=enospc")
        # Without --force other.bin stays, so big.bin finds no room.
        ran = cli.run("restore", snap, expect=3, env=env)
        assert "No space left on device" in ran.stdout, str(ran)
        assert not list(root.rglob(".earshot-tmp-*"))
        assert cli.run("fsck").rc == 0
        (root / "other.bin").unlink()  # room again
        cli.run("restore", snap)
        assert tree(root) == wanted


def test_an_io_error_in_the_tree_during_undo_keeps_the_batch_undoable(
    cli: Any, root: Path, tree: Picture
) -> None:
    (root / "d").mkdir()
    for i in range(5):
        (root / "d" / f"f{i}").write_text(f"{i}\n")
    sid = cli.new_session()
    pristine = tree(root)
    cli.run("bash", "rm -rf d", session=sid)
    ran = cli.run(
        "undo",
        "--json",
        session=sid,
        expect=3,
        env=cli.env(sid, EARSHOT_FAULTS="restore-rename@3=eio"),
    )
    kept = ran.json()["kept"]
    assert [k["reason"] for k in kept] == ["Input/output error"], ran
    assert cli.run("fsck").rc == 0
    cli.run("undo", session=sid)  # the batch is still undoable: the retry finishes it
    assert tree(root) == pristine
