"""``earshot watch``: start, find the running one, --status, --stop, --foreground."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from earshot.agent.watch import client as wc

if TYPE_CHECKING:
    from pathlib import Path

    from earshot_cli import Cli

pytestmark = [
    pytest.mark.watcher,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify"),
]


@pytest.fixture
def ws(cli: Cli) -> Iterator[Cli]:
    """The CLI, with any daemon it started stopped afterwards (killed if it will not stop)."""
    try:
        yield cli
    finally:
        paths = wc.daemon_paths(cli.root, cli.home)
        pid = wc.daemon_pid(paths)
        if pid and wc.stop_daemon(paths, wait=3.0) and wc.daemon_pid(paths) is not None:
            os.kill(pid, signal.SIGKILL)


def test_watch_starts_once_and_status_and_stop_report_it(ws: Cli) -> None:
    (ws.root / "src").mkdir()
    first = ws.json("watch")
    assert first["running"] and first["started"] and first["pid"] > 0
    again = ws.run("watch")
    assert again.stdout.strip() == f"already watching {ws.root} (pid {first['pid']})"
    status = ws.json("watch", "--status")
    assert status["running"] and status["pid"] == first["pid"]
    assert status["watched_dirs"] == 2 and status["max_user_watches"] > 0
    assert status["gaps"] == [] and status["healthy"]
    text = ws.run("watch", "--status").stdout
    assert f"watching {ws.root} (pid {first['pid']}" in text
    assert "2 directories watched" in text and "no gap since it started" in text
    stopped = ws.run("watch", "--stop")
    assert stopped.stdout.strip() == f"stopped the watch daemon of {ws.root} (pid {first['pid']})"
    assert ws.json("watch", "--status") == {"root": str(ws.root), "running": False}
    assert ws.run("watch", "--stop").stdout.strip() == f"no watch daemon for {ws.root}"


def test_status_shows_a_gap_in_words(ws: Cli) -> None:
    ws.run("watch")
    (ws.root / ".gitignore").write_text("*.tmp\n")  # rules changed at the root: a gap
    tracker = wc.DaemonTracker(ws.root, ws.home)
    tracker.changed_since(tracker.token())  # a sync point: the event is handled
    tracker.close()
    text = ws.run("watch", "--status").stdout
    assert "gap at " in text and "ignore rules changed at the root" in text


def test_foreground_runs_until_idle_and_a_start_meanwhile_finds_it(ws: Cli) -> None:
    argv = ["watch", "--foreground", "--idle-timeout", "1.5"]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from earshot.cli.main import main; main()", *argv],
        cwd=ws.root,
        env=ws.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        paths = wc.daemon_paths(ws.root, ws.home)
        deadline = time.monotonic() + 120
        while wc.daemon_status(paths) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        # Asked for its status until the start has found it: however slow a
        # loaded machine makes that start, the daemon is not idle meanwhile.
        found_it = threading.Event()

        def keep_busy() -> None:
            while not found_it.wait(0.2):
                wc.daemon_status(paths)

        busy = threading.Thread(target=keep_busy)
        busy.start()
        try:
            found: Any = ws.json("watch")
        finally:
            found_it.set()
            busy.join()
        assert found["started"] is False and found["pid"] == proc.pid
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "watching" in err and "idle, exiting" in err


def test_foreground_while_one_runs_says_so_and_exits_0(ws: Cli) -> None:
    pid = ws.json("watch")["pid"]
    result = ws.run("watch", "--foreground")
    assert result.stdout.strip() == f"already watching {ws.root} (pid {pid})"


def test_two_modes_at_once_is_a_usage_error(ws: Cli) -> None:
    result = ws.run("watch", "--stop", "--status", expect=2)
    assert result.stdout == "" and "at most one of" in result.stderr


def test_a_missing_root_is_a_one_line_error(ws: Cli, check_error: Any) -> None:
    line = check_error(ws.run("watch", "--root", str(ws.root / "nope"), expect=None))
    assert "no such directory" in line


def test_help_describes_the_modes(ws: Cli) -> None:
    out = ws.run("watch", "--help").stdout
    for word in ("--foreground", "--stop", "--status", "--idle-timeout", "EARSHOT_WATCH"):
        assert word in out


def test_watch_list_shows_every_daemon_and_stop_all_stops_them(ws: Cli, tmp_path: Path) -> None:
    cli = ws
    other = tmp_path / "other"
    other.mkdir()
    (other / "f.txt").write_text("x\n")
    cli.run("watch")
    cli.run("watch", "--root", str(other))
    doc = cli.json("watch", "--list", cwd=tmp_path)
    roots = {d["root"]: d for d in doc["daemons"]}
    assert set(roots) == {str(cli.root.resolve()), str(other.resolve())}, doc
    assert all(d["answered"] and d["pid"] > 0 and d["rss_mib"] > 0 for d in roots.values())
    text = cli.run("watch", "--list").stdout
    assert "2 daemons" in text and "'earshot watch --stop --all'" in text, text
    stopped = cli.json("watch", "--stop", "--all")
    assert {s["root"] for s in stopped["stopped"]} == set(roots)
    assert cli.json("watch", "--list")["daemons"] == []
    assert cli.run("watch", "--list").stdout.strip() == "no watch daemon is running"
    refused = cli.run("watch", "--all", expect=2)
    assert "--all goes with --stop" in refused.stderr
