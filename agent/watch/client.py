"""Talking to the watch daemon: a change tracker for short-lived CLI processes.

Lean on purpose: imports neither watchdog nor lmdb, so a CLI call pays one
unix-socket round trip per question, not the start of a watcher.

The daemon of a root lives in its store dir (``$EARSHOT_HOME/checkpoints/
<root-key>/``): ``watch.sock`` (JSON lines), ``watch.lock`` (held with flock
by the running daemon, which writes its pid there; the kernel drops the lock
when the process dies, so a SIGKILL leaves nothing that blocks a restart) and
``watch.log`` (its stdout and stderr). Whatever goes wrong (no daemon, a
stale socket, a timeout, a restarted daemon) the answer is None: a gap, and
the policy falls back to a full restage.

``EARSHOT_WATCH`` = ``auto`` (default) | ``always`` | ``never`` decides when a
command may start the daemon; see :func:`ensure_daemon`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from earshot.agent.watch import protocol
from earshot.cas.errors import EarshotError
from earshot.cas.paths import checkpoints_dir, data_home, real_root

ENV_MODE = "EARSHOT_WATCH"
MODES = ("auto", "always", "never")
DEFAULT_IDLE_S = 1800.0
#: Long enough for the daemon's own settle timeout (5 s) to answer first.
REPLY_TIMEOUT = 7.0
CONNECT_TIMEOUT = 0.5
_LOG_CAP = 1 << 20
#: Exit status of a daemon start that found one running.
ALREADY_RUNNING = 3


class BadWatchMode(EarshotError):
    def __init__(self, raw: str) -> None:
        super().__init__(f"{ENV_MODE}={raw!r}: expected one of {', '.join(MODES)}")


def watch_mode() -> str:
    """``$EARSHOT_WATCH``, default ``auto``."""
    raw = os.environ.get(ENV_MODE, "").strip().lower() or "auto"
    if raw not in MODES:
        raise BadWatchMode(raw)
    return raw


class DaemonPaths(NamedTuple):
    """Where the daemon of one root keeps its socket, lock and log."""

    root: str
    home: Path
    store: Path
    socket: Path
    lock: Path
    log: Path


def daemon_paths(root: str | os.PathLike[str], home: Path | None = None) -> DaemonPaths:
    real = str(real_root(root))
    home = home or data_home()
    store = checkpoints_dir(real, home)
    return DaemonPaths(
        real, home, store, store / "watch.sock", store / "watch.lock", store / "watch.log"
    )


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """An AF_UNIX address for ``path``, via /proc/self/fd when it is too long for sun_path."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    dfd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{dfd}/{path.name}"
    finally:
        os.close(dfd)


def daemon_pid(paths: DaemonPaths) -> int | None:
    """The pid of the daemon holding the lock, else None (none running)."""
    try:
        fd = os.open(paths.lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raw = os.pread(fd, 32, 0).strip()
            return int(raw) if raw.isdigit() else 0  # 0: starting, pid not written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


#: The daemon ``start_daemon`` runs: the watcher alone. The CLI starts
#: ``earshot.cli.daemon``, which also hosts whole commands for thin clients.
DAEMON_MODULE = "earshot.agent.watch.daemon"


class Connection:
    """One socket to the daemon, JSON lines; every failure answers None."""

    def __init__(
        self,
        paths: DaemonPaths,
        timeout: float = REPLY_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.paths = paths
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def ask(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        kept = self._sock is not None
        try:
            return self._ask_once(doc)
        except TimeoutError:
            self.close()  # a daemon too slow to answer is not asked twice
            return None
        except (OSError, ValueError):
            self.close()
            if not kept:
                return None
        try:  # the kept connection's daemon may have gone since: once more, afresh
            return self._ask_once(doc)
        except (OSError, ValueError):
            self.close()
            return None

    def _ask_once(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        if self._sock is None:
            self._sock = self._connect()
        sock = self._sock
        sock.settimeout(self.timeout)
        sock.sendall(json.dumps(doc).encode() + b"\n")
        while b"\n" not in self._buf:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionResetError
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        reply = json.loads(line)
        return reply if isinstance(reply, dict) else None

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.connect_timeout)
            with unix_address(self.paths.socket) as address:
                sock.connect(address)
            # Only a daemon of this user is asked what changed: another's
            # "nothing" would be recorded as the truth.
            if protocol.peer_uid(sock) != os.geteuid():
                raise PermissionError(errno.EPERM, "the daemon runs as another user")
        except OSError:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buf = None, b""


def ask(
    paths: DaemonPaths,
    doc: dict[str, Any],
    timeout: float = REPLY_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> Any:
    """One request on a fresh connection; None if no daemon answered."""
    conn = Connection(paths, timeout, connect_timeout)
    try:
        return conn.ask(doc)
    finally:
        conn.close()


class DaemonTracker:
    """A ChangeTracker answered by the root's watch daemon.

    Tokens are strings ``"<epoch>:<n>"``: the epoch names one daemon's life,
    so a token a killed or restarted daemon gave out is a gap, and a token
    can be persisted as is (in the store, for the next process).
    """

    def __init__(self, root: str | os.PathLike[str], home: Path | None = None) -> None:
        self.paths = daemon_paths(root, home)
        self._conn = Connection(self.paths)
        #: Why the last answer was None.
        self.gap: str | None = None

    def token(self) -> str | None:
        reply = self._conn.ask({"op": "token"})
        if reply is None or "token" not in reply:
            self.gap = "no watch daemon answered"
            return None
        return f"{reply['epoch']}:{reply['token']}"

    def changed_since(self, token: object) -> set[str] | None:
        return self.advance(token)[0]

    def advance(self, token: object) -> tuple[set[str] | None, str | None]:
        """Paths changed since ``token``, and the token of the same sync point."""
        if not isinstance(token, str) or ":" not in token:
            self.gap = "no token from a watch daemon"
            return None, self.token()
        epoch, _, number = token.rpartition(":")
        if not number.isdigit():
            self.gap = "not a watch daemon token"
            return None, self.token()
        reply = self._conn.ask({"op": "changed_since", "token": int(number), "epoch": epoch})
        if reply is None:
            self.gap = "no watch daemon answered"
            return None, None
        following = f"{reply['epoch']}:{reply['token']}" if "token" in reply else None
        paths = reply.get("paths")
        if isinstance(paths, list):
            from earshot.cas.keep import KeepIgnored  # the caller's limits, from its environment

            if reply.get("keep") != KeepIgnored.from_env().describe():
                self.gap = (
                    "the watch daemon watches by other limits for ignored files "
                    "(EARSHOT_KEEP_IGNORED, EARSHOT_IGNORED_*) than this command's"
                )
                return None, following
            self.gap = None
            return set(paths), following
        self.gap = str(reply.get("gap") or reply.get("error") or "unknown")
        if reply.get("announce"):
            from earshot.cas.logs import get_logger  # only on this rare path

            get_logger("earshot.watch").warning(
                "watcher gap: falling back to full restages", reason=self.gap
            )
        return None, following

    def close(self) -> None:
        self._conn.close()


def ensure_daemon(
    root: str | os.PathLike[str],
    home: Path | None = None,
    mode: str | None = None,
    *,
    idle_timeout: float = DEFAULT_IDLE_S,
    wait: float = 2.0,
    module: str = DAEMON_MODULE,
) -> bool:
    """Start the root's daemon if the mode says so; True if one runs (or is starting).

    ``never``: never start one (one already running is still used).
    ``always`` and ``auto``: start one. ``auto`` once started one only when a
    full restage of the root cost more than the restage budget; measured
    since the daemon hosts whole calls, a call through it costs at most
    0.37 of one without it at every tree size measured, from 1,000 files up
    (benchmarks/history/RESULTS-issues-2-25.md, "When to start the daemon"), so ``auto`` now
    starts one for every root, on the first command that records.
    A daemon started here is waited for up to ``wait`` seconds (0.2 s at 10k
    files, 0.6 s at 100k here), so this process's tokens are already good.
    """
    mode = mode or watch_mode()
    if not sys.platform.startswith("linux"):
        return False
    paths = daemon_paths(root, home)
    if daemon_pid(paths) is not None:
        return True
    if mode == "never":
        return False
    return start_daemon(paths, idle_timeout, wait, module=module)[0] is not None


def tracker_for(
    root: str | os.PathLike[str],
    home: Path | None = None,
    mode: str | None = None,
    *,
    module: str = DAEMON_MODULE,
) -> DaemonTracker | None:
    """The tracker a command should use: the daemon's, or None (no watcher)."""
    if ensure_daemon(root, home, mode, module=module):
        return DaemonTracker(root, home)
    return None


def start_daemon(
    paths: DaemonPaths,
    idle_timeout: float = DEFAULT_IDLE_S,
    wait: float = 0.0,
    *,
    module: str = DAEMON_MODULE,
) -> tuple[int | None, bool]:
    """Start the daemon detached; return (its pid or None, whether it answers yet).

    The launcher takes the lock, forks the daemon into its own session and
    exits, so no caller is left with a child to reap. ``wait`` seconds are
    spent waiting for it to answer (it answers once every watch is in place).
    """
    import subprocess  # only when starting one: the per-call path stays lean

    paths.store.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if paths.log.stat().st_size > _LOG_CAP:
            paths.log.unlink()
    argv = [sys.executable, "-m", module, "--detach"]
    argv += ["--root", paths.root, "--home", str(paths.home), "--idle-timeout", str(idle_timeout)]
    with open(paths.log, "ab") as log:
        launcher = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=paths.store,
            start_new_session=True,
            close_fds=True,
            check=False,
            timeout=30,
        )
    if launcher.returncode not in (0, ALREADY_RUNNING):
        return None, False
    deadline = time.monotonic() + wait
    while True:
        pid = daemon_pid(paths)
        reply = ask(paths, {"op": "status"}, timeout=1.0) if pid is not None else None
        if reply is not None or pid is None or time.monotonic() >= deadline:
            return pid, reply is not None
        time.sleep(0.02)


def stop_daemon(paths: DaemonPaths, wait: float = 10.0) -> int | None:
    """Ask the daemon to stop and wait until it has; its pid, or None if none ran."""
    pid = daemon_pid(paths)
    if pid is None:
        return None
    asked = False
    deadline = time.monotonic() + wait
    while daemon_pid(paths) is not None and time.monotonic() < deadline:
        # A daemon still placing its watches has no socket yet: ask again.
        asked = asked or ask(paths, {"op": "stop"}, timeout=2.0) is not None
        time.sleep(0.02)
    return pid


class Running(NamedTuple):
    """A watch daemon of this data directory that holds its lock."""

    paths: DaemonPaths
    pid: int
    #: Its status document; None when it did not answer (starting, or busy).
    status: dict[str, Any] | None


def running_daemons(home: Path | None = None) -> list[Running]:
    """Every watch daemon of the data directory (one per root store that has one)."""
    home = home or data_home()
    found = []
    for store in sorted((home / "checkpoints").glob("*/")):
        paths = DaemonPaths(
            "", home, store, store / "watch.sock", store / "watch.lock", store / "watch.log"
        )
        pid = daemon_pid(paths)
        if pid is None:
            continue
        status = daemon_status(paths)
        root = str(status["root"]) if status is not None else ""
        found.append(Running(paths._replace(root=root), pid, status))
    return found


def daemon_status(paths: DaemonPaths) -> dict[str, Any] | None:
    """The daemon's status document, or None when no daemon answers."""
    # A person asked: a daemon busy accepting is waited for as long as for its
    # answer, not the hot path's half second (a loaded machine missed it).
    reply = ask(paths, {"op": "status"}, connect_timeout=REPLY_TIMEOUT)
    return reply if isinstance(reply, dict) and "root" in reply else None
