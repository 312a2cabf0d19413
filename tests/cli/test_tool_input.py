"""Bad input to the agent's tools: a clear error, never a traceback, a hang or a wrong file.

Each test runs the real ``earshot`` script (``cli``) on real files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli


@pytest.fixture
def session(cli: Cli) -> Cli:
    cli.json("session", "new")  # no "started session" notice joins the error lines
    return cli


def _exec(cli: Cli, calls: list[dict[str, Any]], expect: int = 1) -> list[dict[str, Any]]:
    ran = cli.run("exec", stdin=json.dumps(calls), expect=expect, timeout=20)
    assert "Traceback" not in ran.stderr, str(ran)
    return [json.loads(line) for line in ran.stdout.splitlines()]


@pytest.mark.parametrize(
    "call",
    [
        {"tool": "read_file", "path": "a\u0000b"},
        {"tool": "write_file", "path": "a\u0000b", "content": "x"},
        {"tool": "edit", "path": "a\u0000b", "old": "x", "new": "y"},
        {"tool": "bash", "command": "echo a\u0000b"},
    ],
    ids=["read_file", "write_file", "edit", "bash"],
)
def test_exec_with_a_nul_byte_gives_an_error_result_not_a_traceback(
    session: Cli, call: dict[str, Any]
) -> None:
    (result,) = _exec(session, [call])
    assert result["ok"] is False and "NUL byte" in result["error"]
    assert sorted(os.listdir(session.root)) == []


def test_read_file_and_edit_of_a_fifo_are_refused_without_blocking(
    session: Cli, check_error: Any
) -> None:
    os.mkfifo(session.root / "pipe")
    (result,) = _exec(session, [{"tool": "read_file", "path": "pipe"}])
    assert result["ok"] is False and "not a regular file" in result["error"]
    ran = session.run("edit", "pipe", "--old", "a", "--new", "b", expect=1, timeout=20)
    assert "a FIFO, not a regular file" in check_error(ran)
    (result,) = _exec(session, [{"tool": "write_file", "path": "pipe", "content": "x"}])
    assert result["ok"] is False and "not a regular file" in result["error"]
    assert (session.root / "pipe").is_fifo()


def test_read_file_of_a_directory_is_refused_as_not_a_regular_file(session: Cli) -> None:
    (session.root / "dir").mkdir()
    (result,) = _exec(session, [{"tool": "read_file", "path": "dir"}])
    assert result["ok"] is False and "a directory, not a regular file" in result["error"]


def test_edit_with_an_empty_old_text_says_it_is_empty(session: Cli, check_error: Any) -> None:
    session.write("a.txt", "abc\n")
    ran = session.run("edit", "a.txt", "--old", "", "--new", "x", expect=1)
    message = check_error(ran)
    assert "old text is empty" in message and "not found" not in message
    (result,) = _exec(session, [{"tool": "edit", "path": "a.txt", "old": "", "new": "x"}])
    assert "old text is empty" in result["error"]
    assert (session.root / "a.txt").read_text() == "abc\n"


def test_read_and_edit_follow_an_in_root_symlink_to_its_target(session: Cli) -> None:
    session.write("real/target.txt", "one\n")
    (session.root / "link.txt").symlink_to("real/target.txt")
    (session.root / "dirlink").symlink_to("real")
    (result,) = _exec(session, [{"tool": "read_file", "path": "link.txt"}], expect=0)
    assert result["output"] == "one\n"
    session.run("edit", "link.txt", "--old", "one", "--new", "two")
    assert (session.root / "link.txt").is_symlink()
    assert (session.root / "real/target.txt").read_text() == "two\n"
    session.run("write", "dirlink/target.txt", stdin="three\n")
    assert (session.root / "dirlink").is_symlink()
    assert (session.root / "real/target.txt").read_text() == "three\n"

    # The ledger holds the target, so undo brings the target back.
    changed = [c["path"] for b in session.json("log")["batches"] for c in b["changes"]]
    assert changed == ["real/target.txt", "real/target.txt"]
    session.run("undo", "2")
    assert (session.root / "real/target.txt").read_text() == "one\n"
    assert os.readlink(session.root / "link.txt") == "real/target.txt"


@pytest.mark.parametrize("target", ["/etc/hostname", "../outside.txt", "sub/../../outside.txt"])
def test_a_symlink_out_of_the_root_is_refused_with_a_clear_message(
    session: Cli, check_error: Any, target: str
) -> None:
    outside = session.root.parent / "outside.txt"
    outside.write_text("outside\n")
    (session.root / "sub").mkdir()
    (session.root / "out").symlink_to(target)
    (result,) = _exec(session, [{"tool": "read_file", "path": "out"}])
    assert result["ok"] is False
    assert result["error"] == f"out: a symlink to {target!r}, outside the root; not followed"
    ran = session.run("write", "out", stdin="x\n", expect=1)
    assert "outside the root; not followed" in check_error(ran)
    ran = session.run("edit", "out", "--old", "outside", "--new", "in", expect=1)
    assert "outside the root; not followed" in check_error(ran)
    assert outside.read_text() == "outside\n"
    assert os.readlink(session.root / "out") == target


def test_a_symlink_loop_is_an_error_result(session: Cli) -> None:
    (session.root / "a").symlink_to("b")
    (session.root / "b").symlink_to("a")
    (result,) = _exec(session, [{"tool": "read_file", "path": "a"}])
    assert result["ok"] is False and "Too many levels of symbolic links" in result["error"]


def _without_dac_override() -> tuple[str, ...]:
    """As root, run earshot without the capability that ignores directory permissions."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root ignores a read-only directory, and setpriv is not installed")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--")


def test_write_into_a_read_only_directory_names_the_target_not_a_temp_file(
    session: Cli, check_error: Any
) -> None:
    prefix = _without_dac_override()
    locked = session.root / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        ran = session.run("write", "locked/new.txt", stdin="x\n", expect=1, prefix=prefix)
        message = check_error(ran)
        assert message == "earshot: locked/new.txt: Permission denied"
        assert ".earshot-tmp" not in message
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o755)
    assert not Path(locked, "new.txt").exists()


def test_write_file_content_with_a_lone_surrogate_is_refused_in_one_line(
    session: Cli, check_error: Any
) -> None:
    calls = '[{"tool": "write_file", "path": "w", "content": "a\\udcff"}]'
    line = check_error(session.run("exec", stdin=calls, expect=1))
    assert "call 0: write_file content is not text (a lone surrogate at 1)" in line
    assert not (session.root / "w").exists()


def test_a_path_ending_in_a_slash_is_refused_not_written_as_a_file(session: Cli) -> None:
    (result,) = _exec(session, [{"tool": "write_file", "path": "x3/", "content": "x"}])
    assert result["ok"] is False and "names a directory" in result["error"]
    assert not (session.root / "x3").exists()
