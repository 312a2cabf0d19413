"""Reading a session file's bytes: opening one safely, reading it whole, quickly.

``open_session_fd`` refuses at once anything but a regular file (a FIFO in a
session file's place would hang every reader); ``pread_all`` reads a range
whole; ``gc_paused`` keeps the cyclic collector out of a big load.
"""

from __future__ import annotations

import gc
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from earshot.cas.errors import EarshotError


class SessionCorrupt(EarshotError):
    """A session file that cannot be read as a session."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}; the file needs a person (edit a copy)")
        self.path = path
        self.line = line
        self.reason = reason


def open_session_fd(path: Path, flags: int) -> int:
    """Open a session file; refuse at once (never block) anything but a regular file.

    A FIFO put where a session file was would otherwise hang every reader.
    """
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SessionCorrupt(path, None, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def pread_all(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` (fewer only at end of file)."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


# Loading allocates one dict per line and keeps them all; the cyclic
# collector would walk that growing heap again and again (it doubled the load
# time of a 100,000-entry session). Nothing loaded forms a cycle, so big reads
# pause it. A depth count keeps threads from re-enabling it under each other.
_GC_PAUSE_BYTES = 1 << 20
_gc_lock = threading.Lock()
_gc_depth = 0
_gc_resume = False


@contextmanager
def gc_paused(size: int) -> Iterator[None]:
    """Pause the cyclic GC while handling ``size`` bytes of lines (not for small reads)."""
    global _gc_depth, _gc_resume
    if size < _GC_PAUSE_BYTES:
        yield
        return
    with _gc_lock:
        if _gc_depth == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_resume:
                gc.enable()
