"""The watch daemon, hosting whole earshot commands for thin clients.

``python -m earshot.cli.daemon --root R --home H [--detach]`` runs the watch
daemon (``earshot.agent.watch.daemon``) with a host for ``run`` requests. The
daemon imports every module a command needs once, before it serves; a
request forks a *worker* that already holds them, so a call through the
daemon pays neither Python's start-up nor the imports (about 150 ms of a
call, measured in ``benchmarks/history/RESULTS-issues-2-25.md``), only a fork.

The worker becomes the client's command: it takes the client's stdin,
stdout and stderr (passed as descriptors with the request), its environment,
working directory and umask, and runs the command's code exactly as the
client would have in-process. A batch's shell commands run in the client's
process (``RelayRunner``): the worker asks, the client runs the command with
its own terminal and signals, and says how it ended.

Messages on the connection, one JSON line each, after the request:

    worker -> client  {"op": "worker", "pid": p}          (signals go there)
    worker -> client  {"op": "command", "argv": [...], "cwd": d, "capture": b}
    client -> worker  {"op": "started", "pgid": g, "start": t}
    client -> worker  {"op": "ended", "returncode": n, "output": s, "signal": k}
    worker -> client  {"op": "done", "rc": n}

The worker owns the batch: if the client dies, the command dies with it
(its parent-death signal) and the worker records the batch as interrupted
by a hang-up; if the worker dies, its intent stays and the next command
records the batch (the client says so).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import os
import select
import signal
import socket
import sys
import threading
from typing import Any

from earshot.agent.core.command import Ran, stop_orphaned_group
from earshot.agent.watch import daemon, protocol
from earshot.agent.watch.watcher import Watcher

#: Imported before the first fork, so no worker imports anything.
_PRELOAD = (
    "earshot.cli.main",
    "earshot.cli.common",
    "earshot.cli.render",
    "earshot.cli.render_agent",
    "earshot.cli.cmd_tools",
    "earshot.cli.cmd_history",
    "earshot.cli.cmd_snapshot",
    "earshot.cli.cmd_restore",
    "earshot.cli.cmd_hook",
    "earshot.agent.hooks.claude",
    "earshot.agent.hooks.codex",
    "earshot.agent.hooks.gemini",
    "earshot.agent.hooks.handler",
    "earshot.agent.hooks.process",
    "earshot.agent.core.vouched",
    "earshot.agent.core.engine",
    "earshot.agent.core.undo",
    "earshot.agent.core.recovery",
    "earshot.agent.core.navigation",
    "earshot.agent.shell.destructive",
    "earshot.cas.project",
    "earshot.cas.lmdb_backend",
)


class _Lines:
    """JSON lines from the client, after what the daemon had already read."""

    def __init__(self, conn: socket.socket, rest: bytes) -> None:
        self.conn = conn
        self.buf = rest

    def read(self) -> dict[str, Any] | None:
        """The next message; None when the client is gone."""
        while b"\n" not in self.buf:
            try:
                chunk = self.conn.recv(1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            doc = json.loads(line)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def send(self, doc: dict[str, Any]) -> bool:
        try:
            self.conn.sendall(json.dumps(doc).encode() + b"\n")
        except OSError:
            return False
        return True


class RelayRunner:
    """Runs a batch's shell command in the client's process (a ``CommandRunner``)."""

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines

    def __call__(
        self,
        argv: list[str],
        cwd: str,
        capture: bool,
        on_start: Any = None,
        *,
        on_spawn: Any = None,
    ) -> Ran:
        if not self.lines.send({"op": "command", "argv": argv, "cwd": cwd, "capture": capture}):
            return Ran(128 + signal.SIGHUP, None, signal.SIGHUP)
        group: tuple[int, int | None] | None = None
        while True:
            doc = self.lines.read()
            if doc is None:
                # The client is gone: its shell died with it (parent-death
                # signal), but what the shell started lives on in the group.
                # Stop it before the batch is recorded, as the command that
                # finishes an in-process batch cut off by a kill does.
                if group is not None:
                    stop_orphaned_group(*group)
                return Ran(128 + signal.SIGHUP, None, signal.SIGHUP)
            if doc.get("op") == "started":
                pgid = int(doc["pgid"])
                start = doc.get("start")
                group = (pgid, int(start) if isinstance(start, int) else None)
                if on_start is not None:
                    on_start(pgid, doc.get("start"))
                if on_spawn is not None:
                    on_spawn(pgid)
            elif doc.get("op") == "ended":
                failed = doc.get("oserror")
                if isinstance(failed, list) and len(failed) == 3:
                    raise OSError(*failed)
                sig = doc.get("signal")
                output = doc.get("output")
                return Ran(
                    int(doc["returncode"]),
                    output if isinstance(output, str) else None,
                    int(sig) if isinstance(sig, int) else None,
                )


def hosting(watcher: Watcher) -> daemon.Host:
    """The host of ``run`` requests for a daemon watching with ``watcher``; it also
    answers ``hook-event`` requests itself (``_note_hook_event``)."""
    for name in _PRELOAD:
        importlib.import_module(name)
    spare = _Spare()
    spare.refill()
    build = protocol.build_id()

    def hook_event(doc: dict[str, Any], advance: daemon.Advance) -> dict[str, Any]:
        if doc.get("build") != build:
            return {"noted": False, "build": build}
        return {"noted": _note_hook_event(watcher, doc, advance)}

    def host(conn: socket.socket, doc: dict[str, Any], fds: list[int], rest: bytes) -> bool:
        """Run the request in a worker; False when it was refused (it runs in the client)."""
        why = _credentials_differ(doc.get("peer"))
        if why is not None:
            _Lines(conn, rest).send({"op": "refused", "why": why})
            conn.close()
            for fd in fds:
                os.close(fd)
            return False
        if spare.hand_over(conn, doc, fds, rest):
            spare.refill()  # the next request's worker, forked while this one runs
            return True
        try:
            pid = os.fork()
        except OSError as exc:
            _Lines(conn, rest).send({"op": "refused", "error": exc.strerror or str(exc)})
            conn.close()
            for fd in fds:
                os.close(fd)
            return False
        if pid == 0:
            code = 1
            try:
                code = _work(conn, doc, fds, rest)
            finally:
                os._exit(code)
        conn.close()
        for fd in fds:
            os.close(fd)
        threading.Thread(target=_reap, args=(pid,), daemon=True).start()
        return True

    host.ops = {"hook-event": hook_event}  # type: ignore[attr-defined]
    return host


def _credentials_differ(pid: object) -> str | None:
    """Why a caller must not be hosted: a worker runs with the daemon's groups,
    so a caller with other ones (a dropped supplementary group, ``sg``,
    ``newgrp``) would gain or lose access through it; None: the same."""
    if not isinstance(pid, int):
        return "the caller is not known"
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
    except OSError:
        return "the caller is gone"
    gids = fields.get("Gid", "").split()
    groups = {int(g) for g in fields.get("Groups", "").split() if g.isdigit()}
    egid = int(gids[1]) if len(gids) > 1 and gids[1].isdigit() else -1
    if egid != os.getegid() or groups != set(os.getgroups()):
        return "the caller's groups differ from the daemon's"
    return None


def _note_hook_event(watcher: Watcher, doc: dict[str, Any], advance: daemon.Advance) -> bool:
    """A tool call's start or end, noted in the daemon without a worker when its
    batch allows (``earshot.agent.core.watched``); False: the client runs the
    event as any other."""
    from earshot.agent.core.watched import note_call, nothing_open
    from earshot.agent.hooks import quick
    from earshot.agent.hooks.events import EventKind
    from earshot.agent.hooks.handler import said_of

    agent = doc.get("agent")
    if agent not in quick.AGENTS:
        return False
    module = importlib.import_module(f"earshot.agent.hooks.{agent}")
    event = module.parse(json.loads(str(doc.get("payload"))))
    if event.kind is EventKind.RESPONSE_END:
        return nothing_open(watcher.data_dir, agent, event.session)
    if event.call is None or event.kind not in (EventKind.PRE_TOOL, EventKind.POST_TOOL):
        return False
    ended = said_of(event) if event.kind is EventKind.POST_TOOL else None
    return note_call(
        watcher.data_dir, agent, event.session, event.call, ended=ended, advance=advance
    )


class _Spare:
    """A worker forked ahead of the next request, waiting for it.

    A fork of the daemon (its heap, its threads' state) on the request's path
    cost a hosted call about 1.5 ms of 25-35 (benchmarks/history/RESULTS-issues-2-25.md, "The
    hook's client"); forked between requests, it costs the call nothing. The spare
    waits on a socket pair for the request's connection and descriptors;
    when the daemon goes (killed or idle), its end closes and the spare exits.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._end: socket.socket | None = None

    def refill(self) -> None:
        with self._lock:
            if self._end is not None:
                return
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = os.fork()
            except OSError:
                ours.close()
                theirs.close()
                return  # no spare: the next request forks its own worker
            if pid == 0:
                ours.close()
                # Nothing of the daemon's may stay open here: a lock a daemon
                # thread held at the fork (a session's, while it notes a call)
                # would stay held by this spare until it served a request.
                keep = theirs.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
                os._exit(_wait_for_request(theirs))
            theirs.close()
            self._end = ours
        threading.Thread(target=_reap, args=(pid,), daemon=True).start()

    def hand_over(
        self, conn: socket.socket, doc: dict[str, Any], fds: list[int], rest: bytes
    ) -> bool:
        """Give the request to the spare; False when there is none (or it is gone)."""
        with self._lock:
            end, self._end = self._end, None
        if end is None:
            return False
        message = json.dumps({"doc": doc, "rest": rest.decode("latin-1")}).encode()
        try:
            socket.send_fds(end, [message], [conn.fileno(), *fds])
        except OSError:
            return False  # the spare died: the caller forks a worker as before
        finally:
            end.close()
        conn.close()
        for fd in fds:
            os.close(fd)
        return True


def _name(name: str) -> None:
    """Name this process as ps and /proc show it (``comm``); ctypes costs an import."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write(name)


def _wait_for_request(end: socket.socket) -> int:
    """In a spare: wait for a request, then become its worker (exit code 0 when none came)."""
    # No parent-death signal: it would come when the daemon's *thread* that
    # forked the spare ends, not the daemon. The daemon's end of the pair
    # closes when the daemon exits, however it exits, and the spare with it.
    _name("earshot-spare")  # what ps shows, and the tests look for
    chunks: list[bytes] = []
    fds: list[int] = []
    while True:
        try:
            data, got, _flags, _addr = socket.recv_fds(end, 1 << 20, 4)
        except OSError:
            return 0
        fds += got
        if not data:
            break
        chunks.append(data)
    if len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return 0
    request = json.loads(b"".join(chunks))
    conn = socket.socket(fileno=fds[0])
    end.close()
    return _work(conn, request["doc"], fds[1:], request["rest"].encode("latin-1"))


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _work(conn: socket.socket, doc: dict[str, Any], fds: list[int], rest: bytes) -> int:
    """In the forked worker: become the client's command, run it, say how it ended."""
    _name("earshot-worker")
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    keep = conn.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    lines = _Lines(conn, rest)
    lines.send({"op": "worker", "pid": os.getpid()})
    sys.stdin = _text(0, "r")
    sys.stdout = _text(1, "w", line_buffering=os.isatty(1))
    sys.stderr = _text(2, "w", line_buffering=True)
    env = doc.get("env")
    if isinstance(env, dict):
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
    os.umask(int(doc.get("umask", 0o022)))
    from earshot.agent.core import external
    from earshot.cas import faults
    from earshot.cli import common
    from earshot.cli.main import cli

    faults.reload()  # the client's plan, if it gave one
    common.COMMAND_RUNNER = RelayRunner(lines)
    external.caller_gone = functools.partial(_hung_up, conn)
    caller = doc.get("peer")
    common.CALLER_PID = caller if isinstance(caller, int) else None
    rc = 1
    try:
        os.chdir(str(doc["cwd"]))
        cli.main(args=[str(a) for a in doc.get("argv", [])], prog_name="earshot")
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("earshot: interrupted", file=sys.stderr)
        rc = 130
    except OSError as exc:  # the client's directory is gone, say
        print(f"earshot: {exc.strerror or exc}", file=sys.stderr)
        rc = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    lines.send({"op": "done", "rc": rc})
    return 0


def _hung_up(conn: socket.socket) -> bool:
    """Whether the client closed its end (killed: an agent's hook timeout)."""
    poller = select.poll()
    poller.register(conn, select.POLLRDHUP)
    return any(events & (select.POLLRDHUP | select.POLLHUP) for _, events in poller.poll(0))


def _text(fd: int, mode: str, line_buffering: bool = False) -> io.TextIOWrapper:
    """A text stream on one of the client's descriptors, as Python makes sys.stdout."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, errors="surrogateescape", line_buffering=line_buffering)


def main(argv: list[str] | None = None) -> int:
    return daemon.main(argv, host=hosting, prog="python -m earshot.cli.daemon")


if __name__ == "__main__":
    sys.exit(main())
