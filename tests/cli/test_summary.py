"""Long results: past 50 paths, totals and counts per folder; --list and --json name each."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli

# Once in-process, once through the root's daemon.
pytestmark = pytest.mark.both_modes


def _made(cli: Cli, in_a: int, in_b: int) -> None:
    """A batch of this session that made ``in_a`` files in src/a/ and ``in_b`` in src/b/."""
    cli.write("keep.txt", "kept\n")
    cli.snap()
    cli.run(
        "bash",
        f"mkdir -p src/a src/b && for i in $(seq {in_a}); do echo $i > src/a/$i; done "
        f"&& for i in $(seq {in_b}); do echo $i > src/b/$i; done",
    )


def _listed(text: str) -> list[str]:
    return re.findall(r"^  (?:would )?delete  (\S+)$", text, re.MULTILINE)


def test_an_undo_past_50_paths_prints_totals_and_counts_per_folder(cli: Cli) -> None:
    _made(cli, 40, 20)
    dry = cli.run("undo", "--dry-run").stdout
    assert _listed(dry) == []
    assert "would delete 60 paths in src/: a/ 40, b/ 20" in dry
    assert re.search(r"\(\d+ paths in all; --list lists each one", dry), dry
    done = cli.run("undo").stdout
    assert "delete 60 paths in src/: a/ 40, b/ 20" in done
    assert "recorded as batch 2" in done
    assert len(done.splitlines()) < 10


def test_list_names_every_path_of_a_long_undo(cli: Cli) -> None:
    _made(cli, 40, 20)
    dry = cli.run("undo", "--dry-run", "--list").stdout
    assert len(_listed(dry)) == 60
    assert "paths in all" not in dry
    done = cli.run("undo", "--list").stdout
    assert sorted(_listed(done)) == sorted(
        [f"src/a/{i}" for i in range(1, 41)] + [f"src/b/{i}" for i in range(1, 21)]
    )


def test_json_names_every_path_of_a_long_undo(cli: Cli) -> None:
    _made(cli, 40, 20)
    assert len(cli.json("undo", "--dry-run")["deleted"]) == 60
    assert len(cli.json("undo")["deleted"]) == 60


def test_an_undo_of_up_to_50_paths_lists_each_as_before(cli: Cli) -> None:
    _made(cli, 30, 10)
    dry = cli.run("undo", "--dry-run").stdout
    assert len(_listed(dry)) == 40
    assert "paths in all" not in dry


def test_a_restore_past_50_paths_prints_totals_and_counts_per_folder(cli: Cli) -> None:
    for i in range(45):
        cli.write(f"lib/x/{i}", f"{i}\n")
    for i in range(15):
        cli.write(f"lib/y/{i}", f"{i}\n")
    snap = cli.snap()
    for i in range(45):
        cli.write(f"lib/x/{i}", f"{i} changed\n")
    for i in range(15):
        cli.write(f"lib/y/{i}", f"{i} changed\n")
    dry = cli.run("restore", snap, "--dry-run").stdout
    assert "would write 60 paths in lib/: x/ 45, y/ 15" in dry, dry
    every = cli.run("restore", snap, "--dry-run", "--list").stdout
    assert len(re.findall(r"^  would write   lib/", every, re.MULTILINE)) == 60
    assert len(cli.json("restore", snap, "--dry-run")["written"]) == 60
    done = cli.run("restore", snap).stdout
    assert "write 60 paths in lib/: x/ 45, y/ 15" in done


def test_an_undo_dry_run_rmdirs_only_what_the_undo_will(cli: Cli) -> None:
    """A folder left holding a conflict is not "would rmdir": the undo keeps it."""
    _made(cli, 40, 20)
    (cli.root / "src/b/7").write_text("changed since the batch\n")  # a conflict: it stays
    dry = cli.run("undo", "--dry-run", expect=3).stdout
    assert "would rmdir 1 path in src/:" in dry, dry
    assert "kept (directory not empty) 2 paths" in dry, dry
    planned = cli.json("undo", "--dry-run", expect=3)
    done = cli.json("undo", expect=3)
    for doc in (planned, done):
        assert doc["removed_dirs"] == ["src/a"], doc
        kept = sorted(k["path"] for k in doc["kept"] if "not empty" in k["reason"])
        assert kept == ["src", "src/b"], doc
    assert (cli.root / "src/b/7").exists() and not (cli.root / "src/a").exists()
