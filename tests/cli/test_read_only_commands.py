"""Commands that only read never create state: no store, no session, no session log.

Each runs the real ``earshot`` script (``cli``) and then looks at the data
directory on disk.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli

NO_SESSIONS = "no sessions in this root ('earshot session new' starts one)"

#: command -> (exit code, what it says) in a root earshot never recorded.
UNRECORDED = {
    ("log",): (0, NO_SESSIONS),
    ("tree",): (0, NO_SESSIONS),
    ("sessions",): (0, "no sessions yet ('earshot session new')"),
    ("sessions", "check"): (0, "no session files in"),
    ("snapshots",): (0, "no snapshots yet (run 'earshot snapshot')"),
    ("stats",): (0, "nothing recorded in this root yet (no store)"),
    ("fsck",): (0, "nothing recorded in this root yet (no store): nothing to check"),
    ("diff", "1"): (1, NO_SESSIONS),
    ("diff", "0123abcd"): (1, "no snapshot '0123abcd'"),
    ("undo", "--dry-run"): (1, NO_SESSIONS),
    ("redo", "--dry-run"): (1, NO_SESSIONS),
    ("rewind", "1", "--code", "--dry-run"): (1, NO_SESSIONS),
}


def _everything(home: Path) -> list[str]:
    """Every path under the data directory, lock files aside (a dry run takes undo's lock)."""
    if not home.exists():
        return []
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.suffix != ".lock")


@pytest.mark.parametrize("args", list(UNRECORDED), ids=" ".join)
def test_a_read_only_command_in_an_unrecorded_root_creates_no_store(
    cli: Cli, args: tuple[str, ...]
) -> None:
    code, says = UNRECORDED[args]
    ran = cli.run(*args, expect=code)
    assert says in (ran.stdout if code == 0 else ran.stderr), str(ran)
    cli.run(*args, "--json", expect=code)
    assert not cli.home.exists(), _everything(cli.home)


def test_log_with_root_slash_creates_no_session(cli: Cli) -> None:
    ran = cli.run("log", "--root", "/")
    assert ran.stdout == NO_SESSIONS + "\n"
    assert cli.json("log", "--root", "/") == {
        "session": None,
        "batches": [],
        "pending": [],
        "outside": [],
    }
    assert not cli.home.exists(), _everything(cli.home)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher is Linux-only")
def test_watch_status_creates_nothing(cli: Cli) -> None:
    assert "not watching" in cli.run("watch", "--status").stdout
    assert not cli.home.exists(), _everything(cli.home)


@pytest.mark.parametrize(
    "args",
    [a for a in UNRECORDED if a[0] in ("log", "tree", "diff", "undo", "redo", "rewind")],
    ids=" ".join,
)
def test_a_read_only_command_in_a_root_with_snapshots_but_no_session_starts_none(
    cli: Cli, args: tuple[str, ...]
) -> None:
    cli.write("a.txt", "a\n")
    cli.snap()
    before = _everything(cli.home)
    ran = cli.run(*args, expect=UNRECORDED[args][0])
    assert "started session" not in ran.stderr
    assert cli.json("sessions") == {"sessions": []}
    assert _everything(cli.home) == before


def test_reading_a_session_whose_log_is_gone_does_not_recreate_the_log(cli: Cli) -> None:
    sid = cli.json("session", "new")["id"]
    cli.run("bash", "echo a > a.txt")
    logs = list((cli.home / "sessions").rglob(f"{sid}.jsonl"))
    assert len(logs) == 1
    logs[0].unlink()
    before = _everything(cli.home)
    assert cli.json("log")["session"] == sid
    assert cli.json("tree") == {"session": sid, "prompts": []}
    assert cli.json("undo", "--dry-run")["deleted"] == ["a.txt"]
    cli.run("rewind", "1", "--code", "--dry-run", expect=1)
    assert _everything(cli.home) == before
    assert (cli.root / "a.txt").exists()
