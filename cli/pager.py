"""A pager for long output on a terminal, as git starts one.

``diff``, ``log``, ``tree`` and ``transcript`` write to a pager when stdout is a terminal:
``$EARSHOT_PAGER``, else ``$PAGER``, else ``less``, run by the shell with
``LESS=FRX`` unless ``$LESS`` is set (so output that fits the screen is
printed and the pager exits at once, in colour, and the screen is not
cleared). An empty pager or ``cat`` means none; so does ``--no-pager``,
JSON output and a pager that is not installed.

The pager is started here, before the command runs, by the process the
person started: its stdin pipe becomes this process's stdout, which a
daemon's worker then writes to as it would to the terminal (the client
hands it its descriptors), and this process waits for the pager at exit.
``EARSHOT_COLOR=always`` tells the command (here or in the worker) that the
pipe leads to a terminal. Standard library only, as ``earshot.cli.entry``.
"""

from __future__ import annotations

import os

from earshot.cli.global_options import PAGED

_NONE = ("", "cat")


def start(argv: list[str], refused: bool) -> None:
    """Put a pager behind stdout for ``argv`` (without the program name), if it takes one."""
    if refused or not argv or argv[0] not in PAGED or not os.isatty(1):
        return
    if any(a in ("--json", "-h", "--help") for a in argv[1:]):
        return
    command = os.environ.get("EARSHOT_PAGER", os.environ.get("PAGER", "less")).strip()
    if command in _NONE:
        return
    import shlex
    import shutil

    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        return
    if shutil.which(program) is None:
        return  # no pager here: plain output beats a shell's "not found"
    import atexit
    import subprocess

    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    read_end, write_end = os.pipe()
    try:
        pager = subprocess.Popen(command, shell=True, stdin=read_end, env=env)
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return
    os.close(read_end)
    os.dup2(write_end, 1)
    os.close(write_end)
    os.environ.setdefault("EARSHOT_COLOR", "always")
    atexit.register(_wait, pager)
    import signal

    # Ctrl-C reaches the pager and this process alike: the person is reading
    # (less takes it to stop a search), so no "Aborted!" over the screen; this
    # process waits for the pager, then ends as interrupted. (Through a daemon
    # the client passes the signal on to the worker instead.)
    _PAGER.append(pager)
    signal.signal(signal.SIGINT, _interrupted)


#: The pager started; and set once this process waits for it.
_PAGER: list[object] = []
_WAITING: list[bool] = []


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: wait for the pager, then end as interrupted, with no word over its screen.

    Never an exception: it may arrive anywhere, interpreter shutdown included.
    """
    if _WAITING:
        return  # already waiting for the pager (whose wait holds a lock): it was the pager's
    _wait(_PAGER[0])
    os._exit(130)


def _wait(pager: object) -> None:
    """Let the pager see the end of the output, then wait until the person quits it."""
    import contextlib
    import sys

    _WAITING.append(True)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError):
        os.close(1)
    pager.wait()  # type: ignore[attr-defined]
