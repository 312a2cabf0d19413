"""Commands hosted by the root's watch daemon: the thin client, its worker, and their faults.

Every test runs the real ``earshot`` script against a real daemon
(``earshot watch``); the checkpoint tests run through it too (``both_modes``).
"""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli
from fake_agent import Claude

from earshot.agent.watch import protocol

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


@pytest.fixture
def served(cli: Cli) -> Iterator[Cli]:
    """``cli`` with the root's daemon running."""
    cli.run("watch")
    try:
        yield cli
    finally:
        cli.run("watch", "--stop", expect=None)


def _status(cli: Cli) -> dict[str, Any]:
    doc: dict[str, Any] = cli.json("watch", "--status")
    return doc


def test_a_call_goes_through_the_daemon_with_stdin_stdout_stderr_and_exit_code(
    served: Cli,
) -> None:
    sid = served.new_session()
    before = _status(served)["hosted_calls"]
    ran = served.run("bash", "echo out; echo err >&2; exit 7", session=sid, expect=7)
    assert ran.stdout == "out\n" and ran.stderr == "err\n"
    served.run("write", "w.txt", stdin="from stdin\n", session=sid)
    assert (served.root / "w.txt").read_text() == "from stdin\n"
    doc = served.json("log", session=sid)
    assert [b["calls"][0]["tool"] for b in doc["batches"]] == ["bash", "write_file"]
    assert _status(served)["hosted_calls"] == before + 3


def test_a_hosted_bash_runs_on_the_callers_terminal(served: Cli) -> None:
    sid = served.new_session()
    pid, fd = pty.fork()
    if pid == 0:  # the child: earshot on a pseudo-terminal
        os.environ.update(served.env(sid))
        os.chdir(served.root)
        os.execv(str(EARSHOT), [str(EARSHOT), "bash", "test -t 1 && echo on-a-tty"])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert b"on-a-tty" in out
    assert _status(served)["hosted_calls"] >= 1


def _wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _gone(marker: str, timeout: float = 90.0) -> None:
    """Wait until no process's command line holds ``marker`` (a killed one may
    take a moment to go; one not killed goes when its command ends)."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, f"a process of {marker!r} still runs"
        time.sleep(0.05)


def _kill_client_mid_call(
    served: Cli, sid: str, ready: Path, command: str, **env: str
) -> list[Any]:
    """Run ``earshot bash COMMAND`` (``env`` added), SIGKILL the client once
    ``ready`` exists, and wait for the worker to record the batch (a hang-up);
    the batches."""
    proc = subprocess.Popen(
        [str(EARSHOT), "bash", command],
        cwd=served.root,
        env=served.env(sid, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(ready)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 90  # "never" on a loaded machine too
    while True:
        batches: list[Any] = served.json("log", session=sid)["batches"]
        if batches or time.monotonic() > deadline:
            return batches
        time.sleep(0.1)


def test_a_client_killed_mid_call_leaves_its_batch_recorded_and_the_command_stopped(
    served: Cli, tmp_path: Path
) -> None:
    sid = served.new_session()
    ready = tmp_path / "ready"
    # An unusual duration, so that pgrep finds this test's shell and no other's.
    command = f"echo made > made.txt; touch {ready}; sleep 30.23; echo late > late.txt"
    (batch,) = _kill_client_mid_call(served, sid, ready, command)
    assert [c["path"] for c in batch["changes"]] == ["made.txt"]
    # Once the shell is gone it can write nothing: had it lived, it would
    # have gone only after writing late.txt (30 s on).
    _gone("sleep 30.23; echo late")
    assert not (served.root / "late.txt").exists()  # the command died with its client
    served.run("bash", "echo next > next.txt", session=sid)
    served.run("undo", session=sid)
    assert not (served.root / "next.txt").exists() and (served.root / "made.txt").exists()


def _worker_pids(daemon_pid: int) -> set[int]:
    """The daemon's workers serving a call (not the spare waiting for the next one)."""
    pids = set()
    for task in Path(f"/proc/{daemon_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            comm = Path(f"/proc/{child}/comm")
            if comm.exists() and comm.read_text().strip() == "earshot-worker":
                pids.add(int(child))
    return pids


def test_a_worker_killed_mid_call_is_said_and_the_next_command_records_the_batch(
    served: Cli, tmp_path: Path
) -> None:
    sid = served.new_session()
    daemon = int(_status(served)["pid"])
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [str(EARSHOT), "bash", f"echo made > made.txt; touch {ready}; sleep 1"],
        cwd=served.root,
        env=served.env(sid),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(ready)
    (worker,) = _worker_pids(daemon)
    os.kill(worker, signal.SIGKILL)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "worker stopped before the call ended" in err
    nxt = served.run("bash", "echo next > next.txt", session=sid)
    assert "recorded interrupted batch 1" in nxt.stderr, str(nxt)
    batches = served.json("log", session=sid)["batches"]
    assert batches[0]["interrupted"] and [c["path"] for c in batches[0]["changes"]] == ["made.txt"]
    assert (served.root / "made.txt").read_text() == "made\n"  # run once, not twice


@pytest.mark.parametrize("changed", ["agent/watch/protocol.py", "cli/cmd_snapshot.py"])
def test_a_daemon_of_another_build_is_stopped_and_the_call_runs_here(
    served: Cli, changed: str
) -> None:
    # Any module counts: an upgrade that changes only a command's code too.
    sid = served.new_session()
    assert _status(served)["pid"]
    module = Path(protocol.__file__).parents[2] / changed
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        served.run("bash", "echo x > x.txt", session=sid)
    finally:
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _status(served)["running"] is False
    assert (served.root / "x.txt").exists()
    assert len(served.json("log", session=sid)["batches"]) == 1


def _stand_in(cli: Cli, sock: Path, serve: Any) -> socket.socket:
    """A fake daemon for ``cli``'s root at ``sock``: ``serve(conn, lines)`` answers
    its one connection, on a thread. Returns the listener (close it after)."""
    alias = Path(protocol.alias_path(str(cli.home), os.path.realpath(cli.root)))
    alias.parent.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(4)
    alias.symlink_to(sock)

    def accept() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as lines:
            serve(conn, lines)

    threading.Thread(target=accept, daemon=True).start()
    return listener


def test_a_daemon_of_an_older_protocol_is_told_to_stop_and_the_call_runs_here(
    cli: Cli, tmp_path: Path
) -> None:
    # A stand-in for an old daemon: it answers without "v", and records what it is asked.
    asked: list[str] = []

    def old_daemon(conn: socket.socket, lines: Any) -> None:
        for line in lines:
            asked.append(json.loads(line).get("op"))
            conn.sendall(b'{"error": "unknown op"}\n')

    listener = _stand_in(cli, tmp_path / "old.sock", old_daemon)
    sid = cli.new_session()
    cli.run("bash", "echo x > x.txt", session=sid)
    listener.close()
    assert asked[:2] == ["hello", "stop"]
    assert len(cli.json("log", session=sid)["batches"]) == 1


def test_another_users_process_gets_no_answer(served: Cli) -> None:
    setpriv = "/usr/bin/setpriv"
    if os.geteuid() != 0 or not os.path.exists(setpriv):
        pytest.skip("needs root and setpriv to connect as another user")
    alias = protocol.alias_path(str(served.home), os.path.realpath(served.root))
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({alias!r})\n"
        "except OSError as e:\n"
        "    print('refused', e.errno); sys.exit(0)\n"
        's.sendall(b\'{"op": "status"}\\n\')\n'
        "print('answered' if s.recv(100) else 'closed')\n"
    )
    ran = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        timeout=20,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] in ("refused", "closed"), ran.stdout


def test_the_peer_check_refuses_another_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    from earshot.agent.watch import daemon

    left, right = socket.socketpair()
    with left, right:
        assert daemon._peer_pid(left) == os.getpid()
        monkeypatch.setattr(daemon.os, "getuid", lambda: os.geteuid() + 1)
        assert daemon._peer_pid(left) is None


def test_a_caller_in_another_mount_namespace_is_neither_hosted_nor_vouched_for(
    served: Cli,
) -> None:
    # The daemon's watcher cannot see a tmpfs mounted in the caller's own
    # namespace: trusting it would record "nothing changed" over real files.
    sid = served.new_session()
    served.run("bash", "mkdir -p t && echo a > a.txt", session=sid)
    served.run("snapshot")
    hosted = _status(served)["hosted_calls"]
    script = (
        f"mount -t tmpfs tmpfs t && echo hidden > t/f && echo mounted && {EARSHOT} snapshot --json"
    )
    ran = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=served.root,
        env=served.env(sid),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.stdout.startswith("mounted\n"), ran.stderr
    doc = json.loads(ran.stdout.split("\n", 1)[1])
    assert doc["vouched"] is False and doc["files"] == 2, doc  # a.txt and t/f
    assert _status(served)["hosted_calls"] == hosted  # ran in-process, in its namespace


def test_the_default_mode_starts_the_daemon_and_the_next_call_goes_through_it(
    cli: Cli,
) -> None:
    sid = cli.new_session()
    env = {k: v for k, v in cli.env(sid).items() if k != "EARSHOT_WATCH"}  # auto
    try:
        cli.run("bash", "echo one > one.txt", env=env)  # in-process: it starts the daemon
        assert _status(cli)["pid"] > 0
        cli.run("bash", "echo two > two.txt", env=env)
        assert _status(cli)["hosted_calls"] == 1
        cli.run("undo", env=env)
        assert not (cli.root / "two.txt").exists() and (cli.root / "one.txt").exists()
    finally:
        cli.run("watch", "--stop", expect=None)


def test_two_hosted_calls_at_once_on_one_root_are_both_recorded_as_in_process(
    served: Cli,
) -> None:
    # Two sessions, two workers, commands running side by side: as in-process,
    # the project lock orders the records, each batch holds its own command's
    # file, and what a tree diff found beside another batch is "ambiguous":
    # undo never deletes an ambiguous creation.
    first, second = served.new_session(), served.new_session()
    procs = [
        subprocess.Popen(
            [str(EARSHOT), "bash", f"sleep 2; echo {sid} > {name}"],
            cwd=served.root,
            env=served.env(sid),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for sid, name in ((first, "a.txt"), (second, "b.txt"))
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert _status(served)["hosted_calls"] >= 2
    for sid, name in ((first, "a.txt"), (second, "b.txt")):
        (batch,) = served.json("log", session=sid)["batches"]
        changes = {c["path"]: c for c in batch["changes"]}
        assert name in changes, batch
        assert all(c.get("ambiguous") for c in changes.values()), batch
    served.run("undo", session=first, expect=None)
    assert (served.root / "a.txt").exists() and (served.root / "b.txt").exists()


@pytest.mark.parametrize("answer", [b'{"op": "refused", "error": "no fork"}\n', b""])
def test_a_daemon_that_runs_nothing_leaves_the_call_to_run_here(
    cli: Cli, tmp_path: Path, answer: bytes
) -> None:
    # A stand-in that says hello as this build does, then refuses the run or
    # hangs up before any worker exists: nothing ran, so the call runs
    # in-process, once, and is recorded.
    hello = {"v": protocol.PROTOCOL, "build": protocol.build_id(), "hosts": True}

    def standin(conn: socket.socket, lines: Any) -> None:
        for line in lines:
            if json.loads(line).get("op") == "hello":
                conn.sendall(json.dumps(hello).encode() + b"\n")
            else:
                conn.sendall(answer)
                return

    listener = _stand_in(cli, tmp_path / "standin.sock", standin)
    sid = cli.new_session()
    ran = cli.run("bash", "echo once >> x.txt", session=sid)
    listener.close()
    assert ran.stderr == "", ran.stderr
    assert (cli.root / "x.txt").read_text() == "once\n"
    assert len(cli.json("log", session=sid)["batches"]) == 1


@pytest.mark.parametrize(
    "faults",
    [
        {},
        # The client stops itself once the shell exists, before its own code
        # runs again (as a busy machine may leave it): killed there, the worker
        # must still know the group.
        {"EARSHOT_FAULTS": "command-spawned=stop", "EARSHOT_FAULTS_HOSTED": "1"},
    ],
    ids=["mid-call", "right-after-the-spawn"],
)
def test_what_a_killed_clients_command_started_is_stopped_before_its_batch_is_recorded(
    served: Cli, tmp_path: Path, faults: dict[str, str]
) -> None:
    # The shell dies with its client; a background child it started would
    # write later, into no batch. The worker stops the group first.
    sid = served.new_session()
    ready, go = tmp_path / "ready", tmp_path / "go-after-the-batch"
    # The background child writes once told to, after the batch is recorded:
    # a survivor then writes bg.txt, however slow the machine (no race on a clock).
    command = (
        f"(until [ -e {go} ]; do sleep 0.05; done; echo late > bg.txt) & touch {ready}; sleep 60.31"
    )
    batches = _kill_client_mid_call(served, sid, ready, command, **faults)
    assert batches, "the batch was never recorded"
    go.touch()
    # The shell and its background subshell hold the path in their command
    # line; both gone (a survivor goes only after writing bg.txt), nothing late.
    _gone(str(go))
    assert not (served.root / "bg.txt").exists()
    left = subprocess.run(["pgrep", "-f", "sleep 60.31"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout


def test_the_daemon_keeps_a_spare_worker_that_exits_with_it(served: Cli) -> None:
    # The next call's worker is forked ahead of it; a killed daemon's spare
    # sees its end of the pair close and exits, leaving nothing behind.
    sid = served.new_session()
    served.run("bash", "true", session=sid)
    daemon = int(_status(served)["pid"])
    spares = [
        int(child)
        for task in Path(f"/proc/{daemon}/task").iterdir()
        for child in (task / "children").read_text().split()
        if Path(f"/proc/{child}/comm").read_text().strip() == "earshot-spare"
    ]
    assert len(spares) == 1
    os.kill(daemon, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{spares[0]}/stat")
        if not stat.exists() or stat.read_text().split(") ")[1].startswith("Z"):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the spare worker outlived its daemon")


# -- one user, one daemon: the client trusts only its own ----------------------

SETPRIV = "/usr/bin/setpriv"
NOBODY = 65534


def _needs_root_and_setpriv() -> None:
    if os.geteuid() != 0 or not os.path.exists(SETPRIV):
        pytest.skip("needs root and setpriv to act as another user")


_OTHER_USERS_DAEMON = """
import socket, sys
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=int(sys.argv[1]))
listener.listen(4)  # the listener's credentials are what a client sees
print("listening", flush=True)
while True:
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(5)
        try:
            data = conn.recv(1 << 16)
            print(data.hex(), flush=True)
            if data:  # as a daemon would: hello, then take what comes
                conn.sendall(b'{"v": 2, "hosts": true}\\n')
                while chunk := conn.recv(1 << 16):
                    print(chunk.hex(), flush=True)
        except OSError:
            pass
"""


def _other_users_daemon(cli: Cli, tmp_path: Path, alias_dir_owner: int) -> subprocess.Popen[str]:
    """A process of another user serving the root's socket path (its stdout: what it
    received, in hex). The socket's directory is root's and closed to others;
    the alias's directory belongs to ``alias_dir_owner``."""
    served_from = tmp_path / "sockets"
    served_from.mkdir(mode=0o700)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(served_from / "sock"))  # bound here, listened to there
    as_nobody = (SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
    proc = subprocess.Popen(
        [*as_nobody, sys.executable, "-c", _OTHER_USERS_DAEMON, str(sock.fileno())],
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(sock.fileno(),),
    )
    sock.close()
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    alias = Path(protocol.alias_path(str(cli.home), os.path.realpath(cli.root)))
    alias.parent.mkdir(parents=True, mode=0o755)
    os.chown(alias.parent, alias_dir_owner, alias_dir_owner)
    alias.symlink_to(served_from / "sock")
    return proc


@pytest.mark.parametrize("where", ["socket served by another user", "home of another user"])
def test_a_daemon_of_another_user_is_sent_nothing_and_the_call_runs_here(
    cli: Cli, tmp_path: Path, where: str
) -> None:
    _needs_root_and_setpriv()
    owner = NOBODY if where == "home of another user" else 0
    proc = _other_users_daemon(cli, tmp_path, owner)
    try:
        env = cli.env(API_KEY="sk-do-not-leak")
        ran = cli.run("bash", "echo ran > ran.txt", env=env)
    finally:
        proc.kill()
        received = bytes.fromhex("".join(proc.communicate()[0].split()))
    assert (cli.root / "ran.txt").read_text() == "ran\n"  # it ran here, for real
    assert b"sk-do-not-leak" not in received and b'"run"' not in received, received
    said = "belongs to uid 65534" if owner else "runs as uid 65534"
    assert "not using the watch daemon: " in ran.stderr and said in ran.stderr, ran.stderr
    assert ran.stderr.count("not using the watch daemon") == 1


def test_a_world_writable_directory_on_the_socket_path_is_not_trusted(served: Cli) -> None:
    alias = Path(protocol.alias_path(str(served.home), os.path.realpath(served.root)))
    before = _status(served)["hosted_calls"]
    os.chmod(alias.parent, 0o777)
    try:
        ran = served.run("bash", "echo x > x.txt")
    finally:
        os.chmod(alias.parent, 0o700)
    assert "is writable by other users (mode 777)" in ran.stderr, ran.stderr
    assert _status(served)["hosted_calls"] == before
    served.run("bash", "echo y > y.txt")  # trusted again once mended
    assert _status(served)["hosted_calls"] == before + 1


def test_a_caller_with_other_groups_is_not_hosted(served: Cli) -> None:
    # The worker would run with the daemon's groups: a caller that dropped one
    # (or holds another) would gain or lose access through it.
    _needs_root_and_setpriv()
    before = _status(served)["hosted_calls"]
    ran = served.run("bash", "echo x > x.txt", prefix=(SETPRIV, "--groups=0,4242", "--"))
    assert "not using the watch daemon: the caller's groups differ" in ran.stderr, ran.stderr
    assert (served.root / "x.txt").read_text() == "x\n"
    assert _status(served)["hosted_calls"] == before
    served.run("bash", "echo y > y.txt")  # the same groups: hosted
    assert _status(served)["hosted_calls"] == before + 1


def test_the_full_cli_asks_only_a_daemon_of_its_own_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process, a snapshot asks the daemon what changed: another user's
    # "nothing" would be recorded as the truth.
    from earshot.agent.watch import client

    store = tmp_path / "store"
    store.mkdir()
    paths = client.DaemonPaths(str(tmp_path), tmp_path, store, *(store / n for n in "slg"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(4)

    def answer() -> None:
        for _ in range(2):  # the two connections below
            conn, _ = listener.accept()
            with conn:
                if conn.recv(1 << 16):
                    conn.sendall(b'{"v": 2, "ok": true}\n')

    answering = threading.Thread(target=answer, daemon=True)
    answering.start()
    assert client.ask(paths, {"op": "status"}) == {"v": 2, "ok": True}
    monkeypatch.setattr(client.os, "geteuid", lambda: os.getuid() + 1)
    assert client.ask(paths, {"op": "status"}) is None
    answering.join(timeout=30)
    assert not answering.is_alive()
    listener.close()


def _stopped_worker(root: Path) -> int | None:
    """A daemon worker working in ``root`` that a fault point stopped (state T)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "earshot-worker":
                continue
            if os.readlink(entry / "cwd") != str(root):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state in ("T", "t"):
            return int(entry.name)
    return None


def _hook_clients(agent_pid: int) -> list[int]:
    """The ``earshot hook`` processes the stand-in agent runs (its descendants)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            pid = int(entry.name)
            ancestors = []
            parent = pid
            while parent > 1 and len(ancestors) < 5:
                parent = int(
                    (Path("/proc") / str(parent) / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
                ancestors.append(parent)
        except (OSError, ValueError, IndexError):
            continue
        if agent_pid in ancestors and b"hook" in cmdline and any(b"earshot" in a for a in cmdline):
            found.append(pid)
    return found


def test_a_hook_client_killed_while_its_worker_restages_leaves_the_call_s_changes_undoable(
    served: Cli,
) -> None:
    # The agent's hook timeout kills the PreToolUse client while the worker
    # restages; the agent then runs the tool. The worker must not note the call
    # begun on a state read while the tool ran: it dies as the hook would in
    # its own process, and the call's deletions are the batch's lines of no call.
    root = served.root
    for i in range(40):
        served.write(f"big/f{i}.txt", f"{i}\n")
    agent = Claude(served.env(), root)
    try:
        assert agent.start().rc == 0
        agent.prompt("p")
        agent.write(root / "w.txt", "w\n")
        tool_input = {"command": "rm -rf big", "description": "test"}
        ident = agent.new_id()
        agent.env = served.env(EARSHOT_FAULTS="hook-restage=stop", EARSHOT_FAULTS_HOSTED="1")
        sent: list[Any] = []
        pre = threading.Thread(target=lambda: sent.append(agent.pre("Bash", tool_input, ident)))
        pre.start()
        deadline = time.monotonic() + 60
        while (worker := _stopped_worker(root)) is None:
            assert time.monotonic() < deadline and pre.is_alive(), sent
            time.sleep(0.05)
        for client in _hook_clients(agent.pid):
            os.kill(client, signal.SIGKILL)  # the agent's timeout
        subprocess.run(["rm", "-rf", "big"], cwd=root, check=True)  # the tool runs
        os.kill(worker, signal.SIGCONT)
        pre.join(timeout=60)  # the worker holds the hook's output pipe: until it dies
        assert sent and sent[0].rc != 0, sent
        agent.env = served.env()
        assert agent.post("Bash", tool_input, ident).rc == 0
        agent.response_end()
    finally:
        agent.close()
    (session,) = served.json("sessions")["sessions"]
    doc = served.json("log", session=session["id"])
    assert doc["outside"] == [], doc["outside"]  # the agent's call, not the person's
    (batch,) = doc["batches"]
    assert "never seen" in batch["calls"][1]["gap"], batch
    served.run("undo", session=session["id"], expect=None)
    assert sorted(p.name for p in (root / "big").iterdir()) == sorted(
        f"f{i}.txt" for i in range(40)
    )


def test_an_undo_leaves_no_watch_mark_on_a_head_another_process_recorded_meanwhile(
    served: Cli, root: Path, home: Path
) -> None:
    # While the undo applies, another session's process records a snapshot on
    # its own, older picture of the tree (x.txt still 1): it becomes the head.
    # The undo must not take that for the tree on disk, nor vouch for it: the
    # batch after it still holds x.txt as 2, as on disk.
    from earshot.agent.core.records import TABLES
    from earshot.cas.digest import Digest, blob_digest
    from earshot.cas.lookup import lookup
    from earshot.cas.project import Project

    sid = served.new_session()
    served.run("write", "x.txt", stdin="1\n", session=sid)
    served.run("bash", "echo 2 > x.txt", session=sid)
    served.run("write", "y.txt", stdin="y\n", session=sid)
    first = Digest(bytes.fromhex(served.json("log", session=sid)["batches"][0]["after"]))
    undo = subprocess.Popen(
        [str(EARSHOT), "undo"],
        cwd=root,
        env=served.env(sid, EARSHOT_FAULTS="revert-applied=stop"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert undo.stderr is not None
    said = undo.stderr.readline()
    assert b"earshot-fault: revert-applied (stopped: pid " in said, said
    pid = int(said.rsplit(b" ", 1)[1].rstrip(b")\n"))
    with open(f"/proc/{pid}/stat", "rb") as stat:
        while stat.read().rsplit(b")", 1)[1].split()[0] != b"T":  # the SIGSTOP follows
            stat.seek(0)
            os.sched_yield()
    with Project(root, home=home, extra_tables=TABLES) as project:
        older = project.read_snapshot(first).tree
        project.record(["elsewhere.txt"], base=older, listed=False)
    os.kill(pid, signal.SIGCONT)
    _out, err = undo.communicate(timeout=60)
    assert undo.returncode == 0, err
    assert not (root / "y.txt").exists()
    served.run("write", "z.txt", stdin="z\n", session=sid)
    last = served.json("log", session=sid)["batches"][-1]
    with Project(root, home=home, extra_tables=TABLES) as project, project.store.reader() as r:
        for side in ("before", "after"):
            tree = project.read_snapshot(Digest(bytes.fromhex(last[side]))).tree
            entry = lookup(r, tree, "x.txt")
            assert entry is not None and entry.digest == blob_digest(b"2\n"), side
    assert (root / "x.txt").read_text() == "2\n"
