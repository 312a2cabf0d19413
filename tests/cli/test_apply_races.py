"""Appliers check before they write: an edit made while undo, redo or restore
is applying is kept, reported, and never overwritten.

The applier is stopped (SIGSTOP, a fault point) just before it renames a
planned file into place; the test edits that file as a person would, lets
the applier go on, and checks the edit is still there.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING

import pytest
from earshot_cli import EARSHOT

pytestmark = pytest.mark.both_modes

if TYPE_CHECKING:
    from earshot_cli import Cli


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] == b"T"


def apply_while_editing(cli: Cli, args: tuple[str, ...], path: str, edit: bytes) -> str:
    """Run ``earshot ARGS``, stopped before its first rename into the tree;
    write ``edit`` to ``path`` then; return what it said once it is done."""
    proc = subprocess.Popen(
        [str(EARSHOT), *args],
        cwd=cli.root,
        env=cli.env(EARSHOT_FAULTS="restore-rename=stop"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines = []
    pid = None
    for line in proc.stderr:
        lines.append(line.decode())
        if b"earshot-fault: restore-rename (stopped: pid " in line:
            pid = int(line.rsplit(b" ", 1)[1].rstrip(b")\n"))
            break
    assert pid is not None, "".join(lines)
    while not stopped(pid):  # the SIGSTOP follows the line at once
        os.sched_yield()
    (cli.root / path).write_bytes(edit)
    os.kill(pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    return out.decode() + "".join(lines) + err.decode()


def test_a_file_edited_while_undo_applies_is_kept(cli: Cli) -> None:
    cli.write("notes.txt", "mine\n")
    cli.run("snapshot")
    cli.run("bash", "echo agent > notes.txt")
    err = apply_while_editing(cli, ("undo",), "notes.txt", b"typed during the undo\n")
    assert (cli.root / "notes.txt").read_bytes() == b"typed during the undo\n"
    assert "notes.txt" in err and "changed since it was planned" in err, err
    # The edit is in the record: redo sees it, and does not overwrite it either.
    redo = cli.run("redo", expect=None)
    assert (cli.root / "notes.txt").read_bytes() == b"typed during the undo\n", str(redo)


def test_a_file_edited_while_restore_applies_is_kept(cli: Cli) -> None:
    cli.write("a.txt", "first\n")
    first = cli.snap()
    cli.write("a.txt", "second\n")
    err = apply_while_editing(cli, ("restore", first), "a.txt", b"typed during the restore\n")
    assert (cli.root / "a.txt").read_bytes() == b"typed during the restore\n"
    assert "a.txt" in err and "changed since it was planned" in err, err


def test_a_file_created_where_undo_restores_one_is_kept(cli: Cli) -> None:
    cli.write("keep.txt", "mine\n")
    cli.run("snapshot")
    cli.run("bash", "rm keep.txt")
    err = apply_while_editing(cli, ("undo",), "keep.txt", b"made again by hand\n")
    assert (cli.root / "keep.txt").read_bytes() == b"made again by hand\n"
    assert "changed since it was planned" in err, err


def test_a_path_unchanged_while_undo_applies_is_written(cli: Cli) -> None:
    # The check refuses only what changed: the other file is restored.
    cli.write("a.txt", "a\n")
    cli.write("b.txt", "b\n")
    cli.run("snapshot")
    cli.run("bash", "echo x > a.txt; echo y > b.txt")
    apply_while_editing(cli, ("undo",), "a.txt", b"edited\n")
    assert (cli.root / "a.txt").read_bytes() == b"edited\n"
    assert (cli.root / "b.txt").read_bytes() == b"b\n"
