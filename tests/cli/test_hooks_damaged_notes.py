"""An open agent batch whose notes file was damaged between two events.

The notes (``intents/<id>`` in the store directory) are how the events of
one batch learn what the earlier ones did. Cut short, garbled, deleted, or
replaced by a FIFO or a link, they prove nothing: the batch is then
recorded as an interrupted one is (from its state before to the tree as
found), no event hangs or follows a link, and undo loses nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import Cli
from fake_agent import Claude

pytestmark = pytest.mark.both_modes


@pytest.fixture
def agent(cli: Cli, root: Path) -> Iterator[Claude]:
    claude = Claude(cli.env(), root)
    assert claude.start().rc == 0
    yield claude
    claude.close()


def notes_file(home: Path) -> Path:
    (notes,) = (p for p in home.glob("checkpoints/*/intents/*") if "." not in p.name)
    return notes


def a_batch_with_a_write_then_damage(
    root: Path, agent: Claude, home: Path, damage: Callable[[Path], None]
) -> None:
    """A write (a file made) and a delete, with the notes damaged in between."""
    (root / "old.txt").write_text("old\n")
    agent.prompt("p")
    agent.write(root / "made.txt", "made\n")
    damage(notes_file(home))
    agent.bash("rm old.txt", lambda: (root / "old.txt").unlink())
    assert agent.response_end().rc == 0


def recorded_by_proof_only(cli: Cli, root: Path) -> None:
    """The batch is interrupted; nothing is pinned on a call; undo loses nothing."""
    (batch,) = cli.run("log", "--json").json()["batches"]
    assert batch["interrupted"] is True
    assert {c["path"]: c["by"] for c in batch["changes"]} == {
        "made.txt": "restage",
        "old.txt": "restage",
    }
    assert "interrupted" in cli.run("log").stdout
    cli.run("undo", expect=None)
    assert (root / "old.txt").read_text() == "old\n"
    # Not proven made by a call: kept, never deleted.
    assert (root / "made.txt").read_text() == "made\n"
    assert cli.run("fsck", expect=0).rc == 0


def cut_short(notes: Path) -> None:
    lines = notes.read_bytes().splitlines(keepends=True)
    notes.write_bytes(b"".join(lines[1:]))


def garbled(notes: Path) -> None:
    with notes.open("ab") as handle:
        handle.write(b"\x00\xffnot a note\n")


def emptied(notes: Path) -> None:
    notes.write_bytes(b"")


def deleted(notes: Path) -> None:
    notes.unlink()


@pytest.mark.parametrize("damage", [cut_short, garbled, emptied, deleted])
def test_damaged_notes_make_the_batch_recorded_by_proof_and_undo_loses_nothing(
    cli: Cli, root: Path, agent: Claude, home: Path, damage: Callable[[Path], None]
) -> None:
    a_batch_with_a_write_then_damage(root, agent, home, damage)
    recorded_by_proof_only(cli, root)


def test_notes_replaced_by_a_fifo_are_never_waited_on(
    cli: Cli, root: Path, agent: Claude, home: Path
) -> None:
    def fifo(notes: Path) -> None:
        notes.unlink()
        os.mkfifo(notes)

    # A FIFO opened for reading with no writer would block each event forever;
    # the events finish (the stand-in agent waits on each), the batch is kept.
    a_batch_with_a_write_then_damage(root, agent, home, fifo)
    recorded_by_proof_only(cli, root)


def test_notes_replaced_by_a_link_are_never_written_through(
    cli: Cli, root: Path, agent: Claude, home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not earshot's\n")

    def link(notes: Path) -> None:
        notes.unlink()
        notes.symlink_to(outside)

    a_batch_with_a_write_then_damage(root, agent, home, link)
    assert outside.read_text() == "not earshot's\n"
    recorded_by_proof_only(cli, root)


def test_undamaged_notes_still_prove_the_write_made_its_file(
    cli: Cli, root: Path, agent: Claude, home: Path, tree: Callable[..., Any]
) -> None:
    # The same batch with its notes left alone: each change is its call's,
    # so the damage above is what made the difference.
    (root / "old.txt").write_text("old\n")
    start = tree(root)
    a_batch_with_a_write_then_damage(root, agent, home, lambda notes: None)
    (batch,) = cli.run("log", "--json").json()["batches"]
    assert batch["interrupted"] is False
    assert {c["path"]: c["by"] for c in batch["changes"]} == {"made.txt": 0, "old.txt": 1}
    cli.run("undo")
    assert tree(root) == start


def test_a_kill_right_after_a_batch_opens_is_a_crash_not_damage(
    cli: Cli, root: Path, agent: Claude
) -> None:
    # Killed after the batch's intent commits, before any note: its notes hold
    # their first line already, so they still prove what later calls made.
    agent.prompt("p")
    agent.env = cli.env(EARSHOT_FAULTS="intent-begun=kill")
    ident = agent.new_id()
    assert agent.pre("Bash", {"command": "true"}, ident).rc != 0
    agent.env = cli.env()
    agent.post("Bash", {"command": "true"}, ident)
    agent.write(root / "made.txt", "made\n")
    agent.response_end()
    (batch,) = cli.run("log", "--json").json()["batches"]
    assert batch["interrupted"] is False
    assert {c["path"]: c["by"] for c in batch["changes"]} == {"made.txt": 1}
    cli.run("undo")
    assert not (root / "made.txt").exists()
