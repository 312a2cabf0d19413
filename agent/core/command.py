"""Running a batch's shell command so that it never outlives what records it.

The command runs in a process group of its own, so the whole group (the
shell and whatever it started) can be signalled at once:

- SIGINT, SIGTERM or SIGHUP to earshot while the command runs is passed on
  to the group, and the command's end is awaited (a second signal kills the
  group, and so do 5 s after a SIGTERM or SIGHUP it ignores); the caller
  then records the batch as usual and exits 128+signal.
- If earshot itself is killed (SIGKILL, a crash), the shell gets SIGKILL from
  the kernel (``PR_SET_PDEATHSIG``), and whatever it started is still in the
  group: the group id and the shell's start time are written into the
  batch's intent notes by the child itself, before it runs the command
  (``on_start``: a kill at any instant after the fork finds the note), and
  the command that finishes the
  interrupted batch kills what is left of the group before recording it
  (``stop_orphaned_group``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from earshot.cas import faults
from earshot.cas.procs import start_time

TYPE_CHECKING = False  # typing costs a thin client's every hosted call a few ms
if TYPE_CHECKING:
    import selectors
    from typing import IO

_PR_SET_PDEATHSIG = 1
#: How long a command may outlive a SIGTERM or SIGHUP passed on to it.
GRACE_S = 5.0
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def shell_argv(command: str) -> list[str]:
    """The user's shell, as a login shell would pick it; /bin/sh otherwise."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    return [shell, "-c", command]


#: Runs a shell command for a batch: ``run_command``'s signature. A daemon
#: hosting the CLI passes one that has its client run the command.
CommandRunner = Callable[..., "Ran"]


class Ran:
    """How a command ended.

    A plain class, not a dataclass: a thin client imports this module to run
    a hosted batch's command, and importing dataclasses costs it ~6 ms.
    """

    __slots__ = ("interrupted_by", "output", "returncode")

    def __init__(
        self, returncode: int, output: str | None, interrupted_by: int | None = None
    ) -> None:
        self.returncode = returncode
        self.output = output
        #: The signal earshot received while the command ran (passed on to it), if any.
        self.interrupted_by = interrupted_by

    def __repr__(self) -> str:
        return f"Ran({self.returncode!r}, {self.output!r}, {self.interrupted_by!r})"


def _before_exec(on_start: Callable[[int, int | None], None] | None) -> Callable[[], None]:
    """What the child does before exec: die with earshot, and say who it is."""

    def child() -> None:
        parent = os.getppid()
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took hold
            os._exit(137)
        if on_start is not None:
            me = os.getpid()  # also its process group's id (process_group=0)
            on_start(me, start_time(me))

    return child


class _Forwarder:
    """Passes SIGINT/SIGTERM/SIGHUP on to the command's group while it runs.

    Installed before the command starts: a signal that arrives between the
    fork and the handler's installation would otherwise stop earshot itself
    (a KeyboardInterrupt, or death by SIGTERM) with the command running on.
    One received before the group exists is passed on as soon as it does.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.pgid: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.pgid is not None:
            self._send(signum)

    def _send(self, signum: int) -> None:
        assert self.pgid is not None
        # The second signal means "now": the group is killed.
        sig = signal.SIGKILL if len(self.received) > 1 else signum
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def started(self, pgid: int) -> None:
        self.pgid = pgid
        if self.received:
            self._send(self.received[-1])


@contextlib.contextmanager
def _forwarding(forwarder: _Forwarder) -> Iterator[None]:
    """Install ``forwarder`` for the forwarded signals (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, forwarder) for sig in _FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_command(
    argv: list[str],
    cwd: str,
    capture: bool,
    on_start: Callable[[int, int | None], None] | None = None,
    *,
    on_spawn: Callable[[int], None] | None = None,
    on_output: Callable[[bytes], None] | None = None,
) -> Ran:
    """Run ``argv`` in a new process group under ``cwd``; stdin is /dev/null.

    ``capture``: return stdout and stderr together as text; otherwise they
    pass through. ``on_start(pgid, start_time)`` runs in the child, before
    exec: it may only write to a descriptor (an intent's notes).
    ``on_spawn(pgid)`` runs here once the child exists (a client of the
    daemon tells it the group this way). ``on_output(chunk)``: each piece of
    captured output as it is read (a face shows it live).
    """
    pipe = subprocess.PIPE if capture else None
    forwarder = _Forwarder()
    received = forwarder.received
    since = 0.0
    with _forwarding(forwarder):
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=pipe,
            # One pipe for both: the output reads in the order it was written.
            stderr=subprocess.STDOUT if capture else None,
            process_group=0,
            preexec_fn=_before_exec(on_start),
        )
        faults.point("command-spawned")  # a signal before the group is known
        # A signal that came before the command existed is one it cannot have
        # chosen to handle, yet a shell starting up may lose it (dash did, 3
        # times in 1,000 on a busy machine): a group that runs on past the
        # grace period after it is killed, whatever the signal.
        early = bool(received)
        forwarder.started(proc.pid)
        if on_spawn is not None:
            on_spawn(proc.pid)
        capture_ = _Capture(proc.stdout, on_output) if proc.stdout is not None else None
        while True:
            try:
                # A wait that wakes up: a signal's handler cannot cut a wait
                # short (PEP 475), and a command that ignores a SIGTERM or
                # SIGHUP passed on to it is killed after a grace period
                # rather than waited on forever.
                if capture_ is None:
                    proc.wait(timeout=0.25)
                    break
                if capture_.read(proc, 0.25):
                    break
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt:  # a handler installed elsewhere raised it
                received.append(signal.SIGINT)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT if len(received) == 1 else signal.SIGKILL)
                continue
            if not received:
                continue
            since = since or time.monotonic()
            stubborn = early or received[0] in (signal.SIGTERM, signal.SIGHUP)
            if stubborn and time.monotonic() - since > GRACE_S:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
    output = capture_.text() if capture_ is not None else None
    return Ran(proc.returncode, output, received[0] if received else None)


#: Bytes of a command's captured output kept: its head and its tail, the cut
#: said between them (1 GB of output must not take 1 GB, twice, to hold).
CAPTURE_HEAD = 4 << 20
CAPTURE_TAIL = 4 << 20
#: How long the output is still read once the shell has exited: something it
#: left running in the background may hold the pipe open for ever.
DRAIN_AFTER_EXIT_S = 1.0


class _Capture:
    """A command's output, read as it comes; head and tail kept."""

    def __init__(self, stream: IO[bytes], on_output: Callable[[bytes], None] | None = None) -> None:
        import selectors  # only a captured command pays for it

        self.on_output = on_output
        self.stream = stream
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.selector: selectors.BaseSelector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0
        self.exited_at: float | None = None
        self.left_running = False
        #: The output ended (EOF): only the shell's exit is waited for now.
        self.ended = False

    def read(self, proc: subprocess.Popen[bytes], timeout: float) -> bool:
        """Read what is there (waiting up to ``timeout``); True once the command is done:
        its output ended and the shell exited, or the shell exited and the pipe
        stayed open past the drain. A shell that closed its output and runs on
        is waited for in steps (``TimeoutExpired``), so that the caller's
        grace period still kills one that ignores the signal passed on."""
        if self.ended:
            proc.wait(timeout=timeout)
            return True
        if self.selector.select(timeout):
            while True:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    break
                if not chunk:
                    self._close()
                    return proc.poll() is not None
                self._add(chunk)
        if proc.poll() is None:
            return False
        self.exited_at = self.exited_at or time.monotonic()
        if time.monotonic() - self.exited_at < DRAIN_AFTER_EXIT_S:
            return False
        # What the command left in the background writes on into a drain
        # that keeps it running (a closed pipe would kill it on its next write).
        self.left_running = True
        self.selector.close()
        threading.Thread(target=_drain, args=(self.stream,), daemon=True).start()
        return True

    def _add(self, data: bytes) -> None:
        if self.on_output is not None:
            self.on_output(data)
        room = CAPTURE_HEAD - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > CAPTURE_TAIL:
                drop = len(self.tail) - CAPTURE_TAIL
                del self.tail[:drop]
                self.cut += drop

    def _close(self) -> None:
        self.ended = True
        self.selector.close()
        self.stream.close()

    def text(self) -> str:
        out = self.head.decode(errors="replace")
        if self.cut:
            out += f"\n[... {self.cut:,} bytes of output not kept ...]\n"
        out += self.tail.decode(errors="replace")
        if self.left_running:
            out += (
                "\n[the command exited; what it left running in the background still "
                "holds its output, which is not waited for]"
            )
        return out


def _drain(stream: IO[bytes]) -> None:
    os.set_blocking(stream.fileno(), True)
    with contextlib.suppress(OSError, ValueError):
        while stream.read(1 << 16):
            pass
    with contextlib.suppress(OSError):
        stream.close()


def stop_orphaned_group(pgid: int, started: int | None, wait_s: float = 5.0) -> bool:
    """Kill what is left of a dead batch's process group; True if anything was.

    Safe against pid reuse: Linux never hands out a pid still in use as a
    process group id, so a group with members but no leader is the old one;
    a live leader counts only if its start time is the recorded one.
    """
    leader = start_time(pgid)
    if leader is not None and started is not None and leader != started:
        return False  # the number now names another process's group
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.01)
    return True
