"""With no session named, undo, redo, log and rewind take the session a person means.

A newer session with nothing in it (an empty chat, an agent run that
changed nothing, ``session new``) is passed over for the most recent one
with batches to act on (prompts, for rewind), and the command says which
it took. Every test runs in-process and through the root's daemon.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from earshot_cli import Cli

pytestmark = pytest.mark.both_modes


def test_undo_takes_the_most_recent_session_with_batches_and_says_which(
    cli: Cli, root: Path
) -> None:
    worked = cli.new_session()
    cli.run("bash", "echo made > made.txt", session=worked)
    empty = cli.new_session()  # newer, and nothing to undo
    log = cli.run("log")
    assert f"session {worked[:12]} (earshot, 1 batch, " in log.stderr, log.stderr
    assert "echo made" in log.stdout
    assert cli.json("log")["session"] == worked
    undone = cli.run("undo")
    assert f"session {worked[:12]} (earshot, 1 batch, " in undone.stderr, undone.stderr
    assert not (root / "made.txt").exists()
    redone = cli.run("redo")
    assert f"session {worked[:12]}" in redone.stderr, redone.stderr
    assert (root / "made.txt").read_text() == "made\n"
    # Named, a session is taken as it is.
    named = cli.run("undo", "--session", empty, expect=None)
    assert "nothing to undo" in named.stdout + named.stderr, named
    assert (root / "made.txt").exists()


def test_a_root_with_one_session_says_nothing_more(cli: Cli, root: Path) -> None:
    sid = cli.new_session()
    cli.run("bash", "echo made > made.txt", session=sid)
    undone = cli.run("undo")
    assert "session " not in undone.stderr, undone.stderr
    assert not (root / "made.txt").exists()


def test_rewind_takes_the_most_recent_session_with_prompts(cli: Cli, root: Path) -> None:
    talked = cli.new_session()
    cli.run("prompt", "make it", session=talked)
    cli.run("bash", "echo made > made.txt", session=talked)
    cli.new_session()  # newer, no prompt
    ran = cli.run("rewind", "1", "--code", "--dry-run")
    assert f"session {talked[:12]}" in ran.stderr, ran.stderr
    assert "made.txt" in ran.stdout, ran.stdout
