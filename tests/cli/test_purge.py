"""``earshot purge``: everything earshot keeps for a root removed, the tree untouched."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from earshot_cli import Cli


def test_purge_removes_the_store_the_logs_and_the_daemon_and_keeps_the_tree(
    cli: Cli, root: Path
) -> None:
    sid = cli.new_session()
    cli.run("bash", "echo made > made.txt", session=sid)
    cli.run("watch")
    assert cli.json("watch", "--list")["daemons"]
    refused = cli.run("purge", expect=2)  # no terminal, no --yes
    assert "give --yes" in refused.stderr, refused.stderr
    assert cli.json("sessions")["sessions"]
    done = cli.json("purge", "--yes")
    assert done["removed"] is True and done["session_logs"] == 1 and done["bytes"] > 0
    assert (root / "made.txt").read_text() == "made\n"  # the tree is the person's
    assert cli.json("watch", "--list")["daemons"] == []
    assert not any((cli.home / "checkpoints").iterdir())
    assert not any((cli.home / "sessions").iterdir())
    again = cli.json("purge", "--yes")
    assert again["removed"] is False


def test_purge_is_refused_while_another_process_has_the_store_open(cli: Cli, root: Path) -> None:
    cli.run("snapshot")
    lock = os.open(cli.store_dir() / "open.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)  # as every process with the store open holds it
        busy = cli.run("purge", "--yes", "--json", expect=1)
        assert busy.json()["error"]["code"] == "store_busy", busy
        assert len(cli.json("snapshots")["snapshots"]) == 1
    finally:
        os.close(lock)


def test_a_purge_killed_after_setting_the_store_aside_is_finished_by_the_next(
    cli: Cli, root: Path
) -> None:
    cli.run("snapshot")
    store = cli.store_dir()
    # As a purge killed mid-rmtree leaves it: the store renamed, its process gone.
    dead = store.with_name(f".{store.name}.purging-{2**22 + 7}")
    store.rename(dead)
    running = store.with_name(f".{store.name}.purging-{os.getpid()}")  # a purge still at it
    running.mkdir()
    cli.json("purge", "--yes")
    assert not dead.exists()
    assert running.exists()


def test_a_purge_killed_half_way_leaves_a_whole_store_and_the_next_removes_all(
    cli: Cli, root: Path
) -> None:
    sid = cli.new_session()
    cli.run("bash", "echo one > one.txt", session=sid)
    killed = cli.run("purge", "--yes", env=cli.env(EARSHOT_FAULTS="purge-logs-aside"), expect=None)
    assert killed.rc == -9 and "earshot-fault: purge-logs-aside" in killed.stderr, killed
    # The logs were set aside before the store: the store goes on whole (its
    # batches numbered on), and no log is left for a new store to take up.
    cli.run("bash", "echo two > two.txt", session=sid)
    assert [b["seq"] for b in cli.json("log", session=sid)["batches"]] == [1, 2]
    cli.json("purge", "--yes")
    assert not any((cli.home / "checkpoints").iterdir())
    leftovers = [p.name for p in (cli.home / "sessions").iterdir()]
    assert leftovers == [], leftovers
