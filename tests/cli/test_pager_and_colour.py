"""Options before the command, a pager and colour on a terminal, as git does them.

``earshot --json log`` is ``earshot log --json``; ``diff``, ``log`` and
``tree`` page and colour their output on a terminal (a real pty), never on
a pipe; ``--no-pager``, ``NO_COLOR`` and a pager that quits early behave as
in git. Both modes: ``log`` runs in the daemon's worker, which writes into
the pager the client started.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pexpect
import pytest
from earshot_cli import EARSHOT, Cli

pytestmark = pytest.mark.both_modes

ESC = "\x1b["


@pytest.fixture
def two_batches(cli: Cli) -> str:
    sid = cli.new_session()
    cli.run("bash", "echo one > one.txt", session=sid)
    cli.run("bash", "echo two >> one.txt; echo new > new.txt", session=sid)
    return sid


def _pager(tmp_path: Path) -> tuple[str, Path]:
    """A pager that leaves a mark, then shows what it was given."""
    mark = tmp_path / "paged.txt"
    script = tmp_path / "pager.sh"
    script.write_text(f'#!/bin/sh\necho "LESS=$LESS" > {mark}\ntee -a {mark}\n')
    script.chmod(0o755)
    return str(script), mark


def _on_a_terminal(cli: Cli, sid: str, *args: str, **env: str) -> tuple[int, str]:
    child = pexpect.spawn(
        str(EARSHOT),
        list(args),
        cwd=str(cli.root),
        env=cli.env(sid, **env),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return child.exitstatus, child.before or ""


def test_options_before_the_command_mean_the_same_as_after_it(cli: Cli, two_batches: str) -> None:
    after = cli.run("log", "--json", session=two_batches)
    before = cli.run("--json", "log", session=two_batches)
    assert before.stdout == after.stdout and before.json()["batches"]
    elsewhere = cli.root.parent
    rooted = cli.run("--root", str(cli.root), "--json", "log", session=two_batches, cwd=elsewhere)
    assert rooted.stdout == after.stdout
    other = cli.new_session()
    chosen = cli.run("--session", two_batches, "--json", "log", session=other)
    assert chosen.json()["session"] == two_batches
    assert "--version" not in before.stderr


def test_log_and_diff_go_through_the_pager_in_colour_on_a_terminal(
    cli: Cli, two_batches: str, tmp_path: Path
) -> None:
    pager, mark = _pager(tmp_path)
    rc, shown = _on_a_terminal(cli, two_batches, "log", EARSHOT_PAGER=pager)
    assert rc == 0
    paged = mark.read_text()
    assert paged.startswith("LESS=FRX\n"), paged
    assert "echo two" in paged and f"{ESC}33m   2" in paged, paged
    assert "echo two" in shown
    mark.unlink()
    rc, _ = _on_a_terminal(cli, two_batches, "diff", "2", PAGER=pager, LESS="R")
    paged = mark.read_text()
    assert paged.startswith("LESS=R\n") and f"{ESC}32m+ new.txt" in paged, paged


def test_no_pager_and_no_color_are_obeyed(cli: Cli, two_batches: str, tmp_path: Path) -> None:
    pager, mark = _pager(tmp_path)
    rc, shown = _on_a_terminal(cli, two_batches, "log", "--no-pager", EARSHOT_PAGER=pager)
    assert rc == 0 and not mark.exists()
    assert "echo two" in shown and ESC in shown  # a terminal: colour, no pager
    rc, shown = _on_a_terminal(cli, two_batches, "--no-pager", "tree", EARSHOT_PAGER=pager)
    assert rc == 0 and not mark.exists()
    rc, shown = _on_a_terminal(cli, two_batches, "log", EARSHOT_PAGER=pager, NO_COLOR="1")
    assert rc == 0 and "echo two" in mark.read_text() and ESC not in mark.read_text()


def test_on_a_pipe_there_is_no_pager_and_no_colour(
    cli: Cli, two_batches: str, tmp_path: Path
) -> None:
    pager, mark = _pager(tmp_path)
    env = cli.env(two_batches, EARSHOT_PAGER=pager)
    for args in (("log",), ("diff", "2"), ("tree",)):
        ran = cli.run(*args, env=env)
        assert ESC not in ran.stdout, ran
    assert "echo two" in cli.run("log", env=env).stdout
    assert not mark.exists()


def test_a_pager_that_quits_early_ends_the_command_without_a_word(cli: Cli, tmp_path: Path) -> None:
    sid = cli.new_session()
    # A diff far larger than a pipe's buffer, so the writer meets the closed pipe.
    cli.write("source.txt", "".join(f"line {i}\n" for i in range(40_000)))
    cli.run("bash", "cp source.txt big.txt", session=sid)
    rc, shown = _on_a_terminal(cli, sid, "diff", "1", EARSHOT_PAGER="head -n 3")
    assert "big.txt" in shown and "Traceback" not in shown and "Broken pipe" not in shown, shown
    assert rc in (0, 141)
    assert os.path.exists(cli.root / "big.txt")


def test_no_pager_before_the_command_leaves_the_other_options_to_move(
    cli: Cli, two_batches: str
) -> None:
    after = cli.run("log", "--json", session=two_batches).stdout
    assert cli.run("--no-pager", "--json", "log", session=two_batches).stdout == after
    assert cli.run("--root", str(cli.root), "--no-pager", "log", "--json").stdout == after


def test_no_pager_as_an_option_s_value_is_that_text(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("bash", "printf 'flag=OLD\\n' > e.txt", session=sid)
    cli.run("edit", "e.txt", "--old", "OLD", "--new", "--no-pager", session=sid)
    assert (cli.root / "e.txt").read_text() == "flag=--no-pager\n"


def test_a_pager_that_exits_at_once_is_not_an_error_message(cli: Cli, two_batches: str) -> None:
    for args in (("diff", "2"), ("log",), ("tree",)):
        _, shown = _on_a_terminal(cli, two_batches, *args, EARSHOT_PAGER="true")
        assert "Broken pipe" not in shown and "earshot:" not in shown, (args, shown)


def test_ctrl_c_in_less_leaves_no_word_over_its_screen(cli: Cli) -> None:
    assert shutil.which("less"), "the pager these tests drive"
    sid = cli.new_session()
    cli.write("source.txt", "".join(f"line {i}\n" for i in range(40_000)))
    cli.run("bash", "cp source.txt big.txt", session=sid)
    env = cli.env(sid, PAGER="less")
    env.pop("LESS", None)
    child = pexpect.spawn(
        str(EARSHOT), ["diff", "1"], cwd=str(cli.root), env=env, dimensions=(10, 100), timeout=60
    )
    child.expect(":")  # less's prompt: the person is reading
    child.sendintr()
    # less drops what was typed ahead when it takes an interrupt: a q sent
    # before it did is lost, so q is pressed again until the pager is gone.
    for _ in range(30):
        child.send("q")
        if child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=2) == 0:
            break
    child.close()
    shown = child.before.decode(errors="replace")
    assert "Aborted" not in shown and "Traceback" not in shown, shown
    assert child.exitstatus in (0, 130), (child.exitstatus, child.signalstatus)
