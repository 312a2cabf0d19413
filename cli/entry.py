"""The ``earshot`` console script: a thin client of the root's daemon, else the full CLI.

For the calls an agent makes on every turn (``bash``, ``write``, ``edit``,
``exec``, ``undo``, ``redo``, ``log``) and for ``snapshot`` and ``restore``,
a daemon watching the root runs the command in a worker that has everything
imported and the watcher at hand (``earshot.cli.daemon``). This module
finds it with the standard library alone: until a daemon answers, nothing
else is imported, so a call without one costs a few milliseconds more than
before, and a call with one costs a bare interpreter's start-up and a fork.

The client hands the worker its stdin, stdout and stderr, its environment,
working directory and umask; runs the batch's shell commands itself, with
its terminal, environment and signals (``run_command``, as in-process); and
passes SIGINT, SIGTERM and SIGHUP on to the worker when no command runs.
No daemon, one of another protocol or build (an upgrade: it is stopped and
the next command starts a new one), one that does not host commands, a
fault plan in ``$EARSHOT_FAULTS``: the full CLI runs in this process.
"""

from __future__ import annotations

import os
import sys

from earshot.agent.watch import protocol
from earshot.cli import global_options, lean, pager, settings_file, trust

# Importing typing costs a few ms of every call; annotations are not
# evaluated here, so type checkers alone need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The commands a daemon runs for a client.
HOSTED = frozenset(
    {"bash", "write", "edit", "exec", "undo", "redo", "log", "snapshot", "restore", "hook"}
)
_CONNECT_S = 0.5
_HELLO_S = 2.0
#: The hook event this process answers, if it is one: (agent, payload, strict).
_HOOK: list[tuple[str, Any, bool]] = []
#: Why the daemon was not trusted, once said.
_REFUSED: list[str] = []


def main() -> None:
    """Console-script entry point."""
    _open_standard_fds()
    if "_EARSHOT_COMPLETE" in os.environ:  # the shell asks for completions
        from earshot.cli.completion import answer_shell

        answer_shell()
    argv, no_pager = global_options.parsed(sys.argv[1:])
    alone = global_options.without_command(argv)
    if alone is not None and not any(a in ("-h", "--help", "--version") for a in argv):
        them = "them" if "," in alone else "it"
        print(
            f"earshot: {alone} need{'' if ',' in alone else 's'} a command after {them} "
            "('earshot --help' lists the commands)",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.argv[1:] = argv  # what the full CLI parses, if it runs here
    try:
        os.getcwd()
    except FileNotFoundError:
        root = _root(argv)
        if root is None or not os.path.isabs(root):
            settings_file.early_error(
                argv,
                "the current directory no longer exists "
                "(cd to an existing one, or give --root an absolute path)",
                "cwd_gone",
            )
    if argv and argv[0] == "hook":
        argv = _hook_event(argv)  # reads the settings once it knows the root
    else:
        settings_file.apply_or_exit(_root(argv) or os.getcwd(), argv)
    pager.start(argv, refused=no_pager)
    code = _through_daemon(argv) if _hostable(argv) else None
    if code is not None:
        sys.exit(code)
    from earshot.cli.main import main as full

    full()


def _hook_event(argv: list[str]) -> list[str]:
    """``earshot hook AGENT``: answer a read-only tool's event at once, else find the root.

    The payload is read here: an event that needs nothing (a Read, a Grep)
    exits before anything else is imported or asked. The root is the agent's
    project directory (or the payload's cwd), given to the command as
    ``--root`` so the daemon of that root serves it; the payload becomes the
    command's stdin again (a memfd), in-process or in the daemon's worker.
    """
    from earshot.agent.hooks import quick

    agent = argv[1] if len(argv) > 1 else ""
    if agent not in quick.AGENTS or any(a in ("-h", "--help") for a in argv[2:]):
        return argv
    import time  # builtin: no cost

    os.environ["EARSHOT_HOOK_STARTED"] = repr(time.time())  # the deadline counts from here
    data = sys.stdin.buffer.read()
    try:
        payload = lean.loads(data.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        payload = None  # the command says what is wrong with it
    if payload is not None and quick.costs_nothing(agent, payload):
        if isinstance(payload, dict) and payload.get("hook_event_name") == quick.PROBE:
            _answer_probe(agent)
        sys.exit(0)
    _HOOK.append((agent, payload, "--strict" in argv[2:]))
    root = _root(argv)
    if root is None:
        root = quick.project_dir(agent, payload) or os.getcwd()
        argv = [*argv, "--root", root]
    # A settings file that cannot be read must not end the hook silently (the
    # tool would run unrecorded): the handler says it, and --strict refuses.
    settings_file.apply_or_note(root)
    quiet = settings_file.BROKEN not in os.environ
    if quiet and quick.daemon_may_answer(agent, payload) and _noted_by_daemon(agent, data, root):
        sys.exit(0)
    fd = os.memfd_create("earshot-hook-event", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    return argv


def _answer_probe(agent: str) -> None:
    """Answer ``earshot doctor``'s probe: the modules an event needs load in this
    interpreter (a venv without lmdb fails here, as a real event would), and
    no store is opened. A settings file that every real event would stop at
    stops the probe too."""
    import json

    settings_file.apply_or_exit(os.getcwd(), [])

    import earshot.agent.hooks.handler
    import earshot.cas.project
    import earshot.cli.cmd_hook  # noqa: F401
    from earshot.cli.main import VERSION

    print(json.dumps({"earshot_probe": {"agent": agent, "version": VERSION}}))
    sys.exit(0)


def _noted_by_daemon(agent: str, data: bytes, root: str) -> bool:
    """Whether the root's daemon answered the event itself, with no worker (a tool
    call's start or end noted, a response's end with nothing open:
    ``earshot.agent.core.watched``); False: the event runs as any other."""
    if not os.path.isdir(root):
        return False
    sock = _connect_trusted(protocol.alias_path(protocol.data_home(), os.path.realpath(root)))
    if sock is None:
        return False
    channel = _Channel(sock)
    try:
        sock.settimeout(_HELLO_S)
        request = {
            "op": "hook-event",
            "agent": agent,
            "build": protocol.build_id(),
            "payload": data.decode("utf-8", "surrogateescape"),
        }
        channel.send(request)
        reply = channel.read()
    except OSError:
        return False
    finally:
        sock.close()
    return reply is not None and reply.get("noted") is True


def _open_standard_fds() -> None:
    """Give a closed stdin, stdout or stderr /dev/null, as a daemon-less process expects.

    Else the next descriptor opened (the daemon's socket) would take the
    number: handed on as the worker's stdin, a call would read its own
    connection and hang.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            stream = open(fd, "r" if fd == 0 else "w", closefd=False)  # noqa: SIM115
            setattr(sys, ("stdin", "stdout", "stderr")[fd], stream)


def _hostable(argv: list[str]) -> bool:
    if not argv or argv[0] not in HOSTED or not sys.platform.startswith("linux"):
        return False
    if "EARSHOT_FAULTS" in os.environ and os.environ.get("EARSHOT_FAULTS_HOSTED") != "1":
        return False  # fault plans are read at import: they run in-process
    return not any(a in ("-h", "--help") for a in argv[1:])


def _served_by_a_daemon(home: str) -> Any:
    """Whether a daemon serves a directory: its socket's alias (SHA-256, no BLAKE3)."""
    return lambda path: os.path.lexists(protocol.alias_path(home, path))


def _root(argv: list[str]) -> str | None:
    """The ``--root`` given, or None."""
    for i, arg in enumerate(argv):
        if arg == "--root" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--root="):
            return arg.partition("=")[2]
    return None


def _connect_trusted(alias: str) -> Any:
    """A connection to the daemon behind ``alias``, if this user may trust it
    (``earshot.cli.trust``); None, said once in one line, when it may not."""
    why = trust.path_refusal(alias)
    if why is not None:
        return _refuse(why)
    sock = _connect(alias)
    if sock is None:
        return None
    why = trust.peer_refusal(sock)
    if why is not None:
        sock.close()
        return _refuse(why)
    return sock


def _refuse(why: str) -> None:
    if not _REFUSED:
        _REFUSED.append(why)
        print(f"earshot: not using the watch daemon: {why}; running here", file=sys.stderr)


def _connect(path: str) -> Any:
    sock = lean.socket(lean.AF_UNIX, lean.SOCK_STREAM)
    sock.settimeout(_CONNECT_S)
    try:
        if len(os.fsencode(path)) < 100:
            sock.connect(path)
        else:  # too long for sun_path: through the directory's descriptor
            dfd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                sock.connect(f"/proc/self/fd/{dfd}/{os.path.basename(path)}")
            finally:
                os.close(dfd)
    except OSError:
        sock.close()
        return None
    return sock


class _Channel:
    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buf = b""

    def send(self, doc: dict[str, Any], fds: list[int] | None = None) -> None:
        data = lean.dumps(doc).encode() + b"\n"
        if fds:
            lean.send_fds(self.sock, data, fds)
        else:
            self.sock.sendall(data)

    def read(self) -> dict[str, Any] | None:
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(1 << 16)
            except InterruptedError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            doc = lean.loads(line.decode("utf-8", "surrogateescape"))
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None


def _through_daemon(argv: list[str]) -> int | None:
    """The command run by the root's daemon; None when the full CLI must run here."""
    root = _root(argv)
    if root is None:  # found as the full CLI finds it (the worker does the same)
        from earshot.cas.rootfind import find_root

        home = protocol.data_home()
        try:
            served = _served_by_a_daemon(home)
            root = find_root(os.getcwd(), home, served).root
        except Exception:  # too wide, or the directory is gone: the full CLI says so
            return None
    if not os.path.isdir(root):
        return None  # the full CLI says so, in its words
    alias = protocol.alias_path(protocol.data_home(), os.path.realpath(root))
    sock = _connect_trusted(alias)
    if sock is None:
        return None
    channel = _Channel(sock)
    try:
        sock.settimeout(_HELLO_S)
        channel.send({"op": "hello"})
        hello = channel.read()
        if (
            hello is None
            or hello.get("v") != protocol.PROTOCOL
            or hello.get("build") != protocol.build_id()
        ):
            _stop(channel)  # another protocol or build: the next command starts ours
            return None
        if not hello.get("hosts"):
            return None
        sock.settimeout(None)
        umask = os.umask(0)
        os.umask(umask)
        request = {
            "op": "run",
            "argv": argv,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": umask,
        }
        channel.send(request, [0, 1, 2])
    except OSError:
        sock.close()
        return None  # nothing ran: the full CLI runs here
    try:
        return _follow(channel)  # None: the daemon ran nothing, the full CLI runs here
    finally:
        sock.close()


def _stop(channel: _Channel) -> None:
    try:
        channel.send({"op": "stop"})
        channel.read()
    except OSError:
        pass


def _follow(channel: _Channel) -> int | None:
    """Serve the worker until it is done; its exit code.

    None when the daemon ran nothing: it refused the call (no fork), or the
    connection ended before a worker said it exists. A worker announces
    itself before it touches anything, so the call can then run here as if
    no daemon answered; once it has, the call is never run twice.
    """
    worker: list[int] = []
    pending: list[int] = []  # signals that came before the worker said its pid

    def forward(signum: int, frame: object) -> None:
        if not worker:
            pending.append(signum)
            return
        _kill(worker[0], signum)

    # The C module: importing ``signal`` would load ``enum`` (a few ms of every call).
    import _signal  # type: ignore[import-not-found]

    handled = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
    before = {sig: _signal.signal(sig, forward) for sig in handled}
    code = _serve(channel, worker, pending)
    if code is None and pending:
        return 128 + pending[0]  # stopped before anything ran
    if code is None:  # the full CLI runs here next, with this process's own handlers
        for sig, handler in before.items():
            _signal.signal(sig, handler)
    return code


def _serve(channel: _Channel, worker: list[int], pending: list[int]) -> int | None:
    while True:
        doc = channel.read()
        if doc is None:
            return _lost() if worker else None
        op = doc.get("op")
        if op == "worker":
            worker[:] = [int(doc["pid"])]
            for signum in pending:  # what came before it reaches it now
                _kill(worker[0], signum)
        elif op == "command":
            ended = _run(channel, doc)
            try:
                channel.send(ended)
            except OSError:
                return _lost()
        elif op == "done":
            return int(doc.get("rc", 1))
        elif op == "refused":
            why = doc.get("why")
            if isinstance(why, str):  # a refusal of trust, not of means (a failed fork)
                _refuse(why)
            return None


def _kill(pid: int, signum: int) -> None:
    """Send a signal to the worker, which may be gone (contextlib costs an import)."""
    try:  # noqa: SIM105
        os.kill(pid, signum)
    except OSError:
        pass


def _lost() -> int:
    """The worker is gone mid-call: never run the call again here, say what happens.

    A hook event says it the agent's way, on stdout, and exits 0 (a tool about
    to run is refused if the hook is ``--strict``): an agent reads a hook's
    exit 1 as nothing at all.
    """
    text = (
        "earshot: the watch daemon's worker stopped before the call ended; "
        "the next earshot command finishes what it began ('earshot log' shows it)"
    )
    if _HOOK:
        from earshot.agent.hooks import quick

        agent, payload, strict = _HOOK[0]
        sys.stdout.write(lean.dumps(quick.lost_answer(agent, payload, strict, text)) + "\n")
        sys.stdout.flush()
        return 0
    print(text, file=sys.stderr)
    return 1


def _run(channel: _Channel, doc: dict[str, Any]) -> dict[str, Any]:
    """Run a batch's shell command here, as the in-process engine would."""
    from earshot.agent.core.command import run_command

    sock = channel.sock.fileno()

    def started(pgid: int, start: int | None) -> None:
        # In the child, before exec: the worker knows the command's group before
        # the command can do anything, so a client killed at any instant after
        # leaves nothing it started unknown (the worker stops the group before
        # it records the batch). Told from here, after the spawn, a client
        # killed first (a busy machine) left a background child running on.
        line = lean.dumps({"op": "started", "pgid": pgid, "start": start}) + "\n"
        try:  # noqa: SIM105 - contextlib costs an import
            os.write(sock, line.encode())
        except OSError:  # a lost worker is told by the reply's failure
            pass

    try:
        ran = run_command(
            [str(a) for a in doc["argv"]],
            str(doc["cwd"]),
            bool(doc.get("capture")),
            on_start=started,
        )
    except OSError as exc:  # the shell could not start: the worker raises it there
        return {"op": "ended", "oserror": [exc.errno, exc.strerror, exc.filename]}
    return {
        "op": "ended",
        "returncode": ran.returncode,
        "output": ran.output,
        "signal": ran.interrupted_by,
    }
