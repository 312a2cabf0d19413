"""The watch daemon: one watcher per project, answering over a unix socket.

Run as ``python -m earshot.agent.watch.daemon --root R --home H [--detach]``
(what ``earshot watch`` and ``client.ensure_daemon`` do). Requests and
replies are JSON lines::

    {"op": "token"}                       -> {"token": n, "epoch": E}
    {"op": "changed_since", "token": n, "epoch": E}
        -> {"paths": [...], "token": m, "epoch": E, "keep": K}
         | {"gap": reason, "token": m, "epoch": E, "announce": true?}
    {"op": "status"}                      -> the watcher's status, pid, epoch, idle
    {"op": "stop"}                        -> {"stopping": true, "pid": p}
    {"op": "hello"}                       -> {"build": B}
    {"op": "run", ...} + 3 descriptors    -> handed to the host (below)

Every reply carries ``"v"``, the protocol (``protocol.PROTOCOL``). A daemon
started with a *host* (``earshot.cli.daemon``) runs whole earshot commands
for thin clients: a ``run`` request comes with the client's stdin, stdout
and stderr as descriptors, and the host owns the connection from then on.
Only a peer of this user is answered (``SO_PEERCRED``); the socket is 0600
in the store directory, with a symlink to it at ``protocol.alias_path``. A
peer in another mount namespace sees other files than the watcher: it gets
status and stop, a hello that hosts nothing, and a gap for every token.

``m`` is the sync point that answered, i.e. the next token. The epoch is
``<pid>-<start ns>``: a token of another epoch (a killed or restarted
daemon's) is a gap. ``announce`` marks the first time a watcher problem
(overflow, watch limit, ...) is reported to any client, so the CLI says it
once on stderr rather than on every call.

Single instance: the daemon holds an exclusive flock on ``watch.lock`` for
its whole life. It binds the socket only once every watch is in place, so a
token it hands out covers everything after it. It exits after the idle
timeout without a request, on ``stop``, SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from earshot.agent.watch import protocol
from earshot.agent.watch.client import (
    ALREADY_RUNNING,
    DEFAULT_IDLE_S,
    DaemonPaths,
    daemon_paths,
    daemon_pid,
    unix_address,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from earshot.agent.watch.watcher import Watcher

    #: Serves one ``run`` request: (the connection, the request, the descriptors
    #: that came with it, what was read after it); owns all of them.
    Host = Callable[[socket.socket, dict[str, Any], list[int], bytes], bool]
    #: ``advance(token)``: the paths changed since a token this daemon gave out
    #: (``"<epoch>:<n>"``; None: a gap, or another daemon's), and the next token.
    Advance = Callable[[object], tuple["set[str] | None", str]]
    #: A request the host answers in the daemon itself: (request, advance) -> reply.
    Op = Callable[[dict[str, Any], Advance], dict[str, Any]]

DEFAULT_SETTLE_S = 5.0
#: What a caller in another mount namespace is told instead of a token.
ELSEWHERE = "the caller is in another mount namespace than the watch daemon"


def take_lock(paths: DaemonPaths) -> int | None:
    """The daemon lock's fd, held; None if another daemon holds it.

    Retried briefly: ``daemon_pid`` probes the lock for an instant.
    """
    paths.store.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + 0.5
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)  # no stale pid while starting; serve() writes ours
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)


def _configure_logging() -> None:
    """earshot's loggers to stderr, which is the log file when detached."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("earshot")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


class Server:
    """Answers requests for one watcher until stopped or idle."""

    def __init__(
        self,
        watcher: Watcher,
        paths: DaemonPaths,
        idle_timeout: float,
        host: Host | None = None,
        ops: Mapping[str, Op] | None = None,
    ) -> None:
        self.watcher = watcher
        self.host = host
        #: Requests the host answers here, without a worker (``Op``).
        self.ops = dict(ops or {})
        #: How many ``run`` requests were handed to the host.
        self.hosted = 0
        self.build = protocol.build_id()
        self.paths = paths
        self.idle_timeout = idle_timeout
        self.epoch = f"{os.getpid()}-{watcher.started_ns}"
        self.stopping = threading.Event()
        #: Set once the socket listens: a connection then is answered (one made
        #: between its bind and its listen is refused).
        self.serving = threading.Event()
        self.last = time.monotonic()
        self._announced: set[str] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    def run(self) -> int:
        from earshot.cas.logs import get_logger

        log = get_logger("earshot.watch")
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stopping.set())
        # We hold the lock: a socket file here is a killed daemon's.
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o077)  # the socket is for this user only
        try:
            with unix_address(self.paths.socket) as address:
                sock.bind(address)
        finally:
            os.umask(old_umask)
        ino = self.paths.socket.stat().st_ino
        alias = self._place_alias()
        sock.listen(64)
        sock.settimeout(min(1.0, self.idle_timeout / 4))  # stop wakes accept() at once
        self._listener = sock
        self.serving.set()
        status = self.watcher.status()
        log.info("watching", root=self.paths.root, pid=os.getpid(), dirs=status["watched_dirs"])
        try:
            while not self.stopping.is_set():
                if time.monotonic() - self.last > self.idle_timeout:
                    log.info("idle, exiting", idle_timeout_s=self.idle_timeout)
                    break
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stopping.is_set():
                        break  # shut down by a stop request
                    raise
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        finally:
            sock.close()
            with contextlib.suppress(OSError):
                if os.readlink(alias) == str(self.paths.socket):
                    os.unlink(alias)
            with contextlib.suppress(OSError):
                if self.paths.socket.stat().st_ino == ino:
                    self.paths.socket.unlink()
            self.watcher.stop()
            log.info("stopped", root=self.paths.root, pid=os.getpid())
        return 0

    def _place_alias(self) -> str:
        """Point ``protocol.alias_path`` at the socket (atomically: link, then rename)."""
        alias = protocol.alias_path(str(self.paths.home), self.paths.root)
        os.makedirs(os.path.dirname(alias), mode=0o700, exist_ok=True)
        temp = f"{alias}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        os.symlink(str(self.paths.socket), temp)
        os.replace(temp, alias)
        return alias

    def _serve(self, conn: socket.socket) -> None:
        peer = _peer_pid(conn)
        if peer is None:
            conn.close()  # another user's process: not a word
            return
        # A caller in another mount namespace (a container, ``unshare -m``)
        # sees other files than the watcher: it is told nothing it could trust.
        elsewhere = not _same_mount_namespace(peer)
        buf = b""
        with contextlib.ExitStack() as stack:
            stack.callback(conn.close)
            while True:
                fds: list[int] = []
                while b"\n" not in buf:
                    try:
                        data, got, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
                    except OSError:
                        return
                    fds += got
                    if not data:
                        _close_all(fds)
                        return
                    buf += data
                line, _, buf = buf.partition(b"\n")
                doc: dict[str, Any] = {}
                try:
                    parsed = json.loads(line)
                    doc = parsed if isinstance(parsed, dict) else {}
                    if elsewhere:
                        _close_all(fds)
                        reply = self.handle_elsewhere(doc)
                    elif doc.get("op") == "run" and self.host is not None and len(fds) == 3:
                        self.last = time.monotonic()
                        stack.pop_all()  # the host owns the connection now
                        doc["peer"] = peer  # the caller, as the kernel names it
                        if self.host(conn, doc, fds, buf):
                            self.hosted += 1
                        return
                    else:
                        _close_all(fds)
                        reply = self.handle(doc)
                except Exception as exc:  # a bad request must not end the daemon
                    _close_all(fds)
                    reply = {"error": repr(exc)}
                reply["v"] = protocol.PROTOCOL
                try:
                    conn.sendall(json.dumps(reply, ensure_ascii=True).encode() + b"\n")
                except OSError:
                    return
                if doc.get("op") == "stop":
                    return

    def handle(self, doc: dict[str, Any]) -> dict[str, Any]:
        """One request -> one reply."""
        idle, self.last = time.monotonic() - self.last, time.monotonic()
        op = doc.get("op")
        if op == "token":
            return {"token": self.watcher.token(), "epoch": self.epoch}
        if op == "changed_since":
            return self._changed_since(doc.get("token"), doc.get("epoch"))
        if op == "status":
            return {
                **self.watcher.status(),
                "pid": os.getpid(),
                "epoch": self.epoch,
                "idle_timeout_s": self.idle_timeout,
                "idle_s": round(idle, 1),
                "hosted_calls": self.hosted,
                "socket": str(self.paths.socket),
                "log": str(self.paths.log),
            }
        if op == "hello":
            return {"build": self.build, "hosts": self.host is not None, "pid": os.getpid()}
        if isinstance(op, str) and op in self.ops:
            return self.ops[op](doc, self.advance)
        if op == "stop":
            self.stopping.set()
            if self._listener is not None:
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)  # wake accept() now
            return {"stopping": True, "pid": os.getpid()}
        return {"error": f"unknown op {op!r}"}

    def advance(self, token: object) -> tuple[set[str] | None, str]:
        """What changed since a token of this daemon (``"<epoch>:<n>"``), and the next."""
        epoch, _, number = token.rpartition(":") if isinstance(token, str) else ("", "", "")
        if epoch != self.epoch or not number.isdigit():
            return None, f"{self.epoch}:{self.watcher.token()}"
        paths, now = self.watcher.advance(int(number))
        return paths, f"{self.epoch}:{now}"

    def handle_elsewhere(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A request from another mount namespace: status and stop, never a token."""
        op = doc.get("op")
        if op in ("status", "stop"):
            return self.handle(doc)
        if op == "hello":
            return {"build": self.build, "hosts": False, "pid": os.getpid()}
        return {"gap": ELSEWHERE, "error": ELSEWHERE}

    def _changed_since(self, token: object, epoch: object) -> dict[str, Any]:
        if epoch != self.epoch:
            now = self.watcher.token()
            reason, problem = "the token is from another watch daemon (restarted or killed)", False
            paths = None
        else:
            paths, now = self.watcher.advance(token)
            if paths is not None:
                # What it watches follows these limits: a caller keeping
                # ignored files by others cannot trust the answer.
                keep = self.watcher.keep.describe()
                return {"paths": sorted(paths), "token": now, "epoch": self.epoch, "keep": keep}
            reason, problem = self.watcher.explain(token)
        reply: dict[str, Any] = {"gap": reason, "token": now, "epoch": self.epoch}
        with self._lock:
            if problem and reason not in self._announced:
                self._announced.add(reason)
                reply["announce"] = True
        return reply


def _peer_pid(conn: socket.socket) -> int | None:
    """The peer's pid when it runs as this user (SO_PEERCRED: pid, uid, gid); else None."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", creds)
    return int(pid) if uid == os.getuid() else None


def _same_mount_namespace(pid: int) -> bool:
    """Whether process ``pid`` sees the mounts this daemon sees (unknown: no)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def serve(
    paths: DaemonPaths,
    lock_fd: int,
    idle_timeout: float,
    settle_timeout: float,
    host: Callable[[Watcher], Host] | None = None,
) -> int:
    """Run the daemon in this process, holding ``lock_fd``, until stopped or idle.

    ``host(watcher)`` makes the host of ``run`` requests (None: the daemon
    only watches); the host's ``ops`` attribute, if any, names the requests
    it answers in the daemon itself (``Op``).
    """
    os.ftruncate(lock_fd, 0)
    os.pwrite(lock_fd, f"{os.getpid()}\n".encode(), 0)
    _configure_logging()
    from earshot.agent.watch.watcher import Watcher  # watchdog loads only in the daemon

    try:
        watcher = Watcher(paths.root, paths.store, settle_timeout=settle_timeout).start()
        made = host(watcher) if host is not None else None
        ops = getattr(made, "ops", None)
        return Server(watcher, paths, idle_timeout, made, ops).run()
    finally:
        os.close(lock_fd)


def run_foreground(
    root: str,
    home: Path | None = None,
    idle_timeout: float = DEFAULT_IDLE_S,
    settle_timeout: float = DEFAULT_SETTLE_S,
    host: Callable[[Watcher], Host] | None = None,
) -> int:
    """``earshot watch --foreground``: 0 when stopped, ALREADY_RUNNING if one runs."""
    paths = daemon_paths(root, home)
    lock = take_lock(paths)
    if lock is None:
        return ALREADY_RUNNING
    return serve(paths, lock, idle_timeout, settle_timeout, host)


def main(
    argv: list[str] | None = None,
    host: Callable[[Watcher], Host] | None = None,
    prog: str = "python -m earshot.agent.watch.daemon",
) -> int:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--root", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_S)
    parser.add_argument("--settle-timeout", type=float, default=DEFAULT_SETTLE_S)
    parser.add_argument("--detach", action="store_true", help="fork; the parent exits at once")
    args = parser.parse_args(argv)
    paths = daemon_paths(args.root, Path(args.home))
    lock = take_lock(paths)
    if lock is None:
        print(f"earshot: already watching {paths.root} (pid {daemon_pid(paths)})", file=sys.stderr)
        return ALREADY_RUNNING
    # The child inherits the locked fd, so the lock is never free in between.
    if args.detach and os.fork() != 0:
        os._exit(0)
    return serve(paths, lock, args.idle_timeout, args.settle_timeout, host)


if __name__ == "__main__":
    sys.exit(main())
