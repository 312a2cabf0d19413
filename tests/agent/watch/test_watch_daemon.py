"""The watch daemon and its client, as real processes on a real socket.

The daemon may be killed at any instant: the client then answers None (a
gap), never a wrong list; a second start finds the first; a socket left by a
killed daemon does not block the next one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from earshot.agent.watch import client as wc
from earshot.agent.watch.daemon import Server
from earshot.agent.watch.watcher import Watcher

pytestmark = [
    pytest.mark.watcher,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify"),
]


def gone(paths: wc.DaemonPaths, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while wc.daemon_pid(paths) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[wc.DaemonPaths]:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    found = wc.daemon_paths(root, tmp_path / "home")
    try:
        yield found
    finally:
        pid = wc.daemon_pid(found)
        if pid and wc.stop_daemon(found, wait=3.0) and not gone(found, 0.1):
            os.kill(pid, signal.SIGKILL)  # only the daemon this test started


def start(paths: wc.DaemonPaths, idle: float = 60.0) -> int:
    pid, ready = wc.start_daemon(paths, idle, wait=10.0)
    assert pid and ready, paths.log.read_text() if paths.log.exists() else "no log"
    return pid


def test_start_answers_and_a_second_start_finds_the_first(paths: wc.DaemonPaths) -> None:
    pid = start(paths)
    assert start(paths) == pid
    argv = ["-m", "earshot.agent.watch.daemon", "--root", paths.root, "--home", str(paths.home)]
    direct = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert direct.returncode == wc.ALREADY_RUNNING
    assert f"already watching {paths.root} (pid {pid})" in direct.stderr
    status = wc.daemon_status(paths)
    assert status is not None and status["pid"] == pid and status["watched_dirs"] == 2
    assert status["healthy"] and status["gaps"] == []
    assert paths.socket.stat().st_mode & 0o077 == 0  # this user only


def test_token_and_changed_since_over_the_socket(paths: wc.DaemonPaths) -> None:
    start(paths)
    tracker = wc.DaemonTracker(paths.root, paths.home)
    try:
        t = tracker.token()
        assert t is not None
        Path(paths.root, "src/a.py").write_text("x\n")
        os.rename(Path(paths.root, "src/a.py"), Path(paths.root, "src/b.py"))
        seen, following = tracker.advance(t)
        assert seen == {"src/a.py", "src/b.py"}
        assert following is not None and following != t
        assert tracker.changed_since(following) == set()
        assert tracker.changed_since(None) is None
        assert tracker.changed_since("garbage") is None
    finally:
        tracker.close()


def test_kill_9_gives_none_and_the_stale_socket_does_not_block_a_restart(
    paths: wc.DaemonPaths,
) -> None:
    pid = start(paths)
    tracker = wc.DaemonTracker(paths.root, paths.home)
    try:
        t = tracker.token()
        os.kill(pid, signal.SIGKILL)
        assert gone(paths)
        assert paths.socket.exists()  # left behind
        Path(paths.root, "src/lost.py").write_text("nobody saw this\n")
        assert tracker.changed_since(t) is None
        assert tracker.token() is None
        new_pid = start(paths)
        assert new_pid != pid
        assert tracker.changed_since(t) is None  # a token of the dead daemon
        assert tracker.gap is not None and "another watch daemon" in tracker.gap
        t = tracker.token()
        Path(paths.root, "src/seen.py").write_text("\n")
        assert tracker.changed_since(t) == {"src/seen.py"}
    finally:
        tracker.close()


def test_stop_removes_the_socket_and_frees_the_lock(paths: wc.DaemonPaths) -> None:
    pid = start(paths)
    assert wc.stop_daemon(paths) == pid
    assert wc.daemon_pid(paths) is None and not paths.socket.exists()
    assert wc.stop_daemon(paths) is None
    assert wc.daemon_status(paths) is None


def test_the_daemon_exits_after_the_idle_timeout(paths: wc.DaemonPaths) -> None:
    start(paths, idle=0.5)
    assert gone(paths, within=120.0)  # a bound for a daemon that never exits, not a timing
    assert not paths.socket.exists()
    assert "idle, exiting" in paths.log.read_text()


def test_bad_requests_get_an_error_and_the_daemon_carries_on(paths: wc.DaemonPaths) -> None:
    pid = start(paths)
    with contextlib.ExitStack() as stack, socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        with wc.unix_address(paths.socket) as address:
            sock.connect(address)
        lines = stack.enter_context(sock.makefile("rb"))
        for raw in (b"not json\n", b'{"op": "dance"}\n', b"[1]\n", b'{"op": "token"}\n'):
            sock.sendall(raw)
            reply = json.loads(lines.readline())
            assert ("error" in reply) == (raw != b'{"op": "token"}\n'), reply
        assert isinstance(reply["token"], int) and reply["epoch"].startswith(f"{pid}-")


def test_a_long_data_dir_path_still_gets_a_socket(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    paths = wc.daemon_paths(root, tmp_path / ("h" * 120))
    assert len(str(paths.socket)) > 108  # too long for sun_path as it is
    try:
        start(paths)
        tracker = wc.DaemonTracker(root, paths.home)
        t = tracker.token()
        (root / "x").write_text("x")
        assert tracker.changed_since(t) == {"x"}
        tracker.close()
    finally:
        wc.stop_daemon(paths)


def test_ensure_daemon_follows_the_mode(
    paths: wc.DaemonPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not wc.ensure_daemon(paths.root, paths.home, "never")
    assert wc.daemon_pid(paths) is None
    assert wc.tracker_for(paths.root, paths.home, "auto") is not None  # any root, any size
    assert wc.daemon_pid(paths) is not None
    # One running is used whatever the mode says.
    assert wc.ensure_daemon(paths.root, paths.home, "never")
    monkeypatch.setenv("EARSHOT_WATCH", "sometimes")
    with pytest.raises(wc.BadWatchMode):
        wc.watch_mode()
    monkeypatch.setenv("EARSHOT_WATCH", "Always")
    assert wc.watch_mode() == "always"


def test_a_watcher_problem_is_announced_to_one_client_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    paths = wc.daemon_paths(root, tmp_path / "home")
    watcher = Watcher(root, paths.store).start()
    server = Server(watcher, paths, idle_timeout=60)
    thread = threading.Thread(target=server.run)
    thread.start()
    tracker = wc.DaemonTracker(root, paths.home)
    try:
        # Listening, not only bound: a connection between the two is refused.
        assert server.serving.wait(60)
        t = tracker.token()
        assert t is not None, tracker.gap
        watcher.on_queue_overflow()
        caplog.clear()
        caplog.set_level(logging.WARNING, "earshot.watch")
        assert tracker.changed_since(t) is None
        assert tracker.changed_since(t) is None
        said = [r.getMessage() for r in caplog.records if r.name == "earshot.watch"]
        assert len(said) == 1 and "inotify queue overflowed: events were lost" in said[0]
    finally:
        tracker.close()
        server.stopping.set()
        thread.join(5)


def test_the_client_imports_neither_watchdog_nor_lmdb() -> None:
    code = "import json, sys, earshot.agent.watch.client; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(json.loads(run.stdout))
    assert not {m.split(".")[0] for m in modules} & {"watchdog", "lmdb", "zstandard"}
    assert not modules & {"earshot.agent.watch.watcher", "earshot.agent.watch.tree"}
