"""Reading and writing files for the agent's tools, never outside the root.

Paths are root-relative after ``relative_path``; every parent is opened with
O_NOFOLLOW from the root down (``DirHandles``), missing parents are created,
and a file is written to a temp file and renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from earshot.cas import faults
from earshot.cas.restage import relative_path
from earshot.cas.restore import DirHandles, UnsafePath
from earshot.cas.scan import TEMP_PREFIX

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parent_fd(handles: DirHandles, rel: str, create: bool) -> tuple[int, bytes]:
    parent, _, name = rel.rpartition("/")
    if create and parent:
        built = ""
        for part in parent.split("/"):
            fd = handles.dir_fd(built)
            built = f"{built}/{part}" if built else part
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.fsencode(part), 0o777, dir_fd=fd)
    return handles.dir_fd(parent), os.fsencode(name)


def write_text_file(root: str, path: str, data: bytes, temp_tag: str | None = None) -> str:
    """Write ``data`` at ``path`` atomically; return the root-relative path.

    An existing file keeps its permission bits; a new one gets the umask's.
    Refuses (UnsafePath) a parent that is a symlink or a file. The temp file
    is named after ``temp_tag`` (the batch's intent): if this process dies
    before the rename, the command that finishes the batch removes it.
    """
    rel = relative_path(root, path)
    handles = DirHandles(root)
    try:
        fd, name = _parent_fd(handles, rel, create=True)
        mode: int | None = None
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", rel)
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
        tag = temp_tag or f"w{os.getpid()}"
        temp = os.fsencode(f"{TEMP_PREFIX}{tag}-{os.urandom(4).hex()}")
        out = os.open(temp, _WRITE_FLAGS, 0o666, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            if mode is not None:
                os.fchmod(out, mode)
        except BaseException:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=fd)
            raise
        os.close(out)
        faults.point("write-rename")
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return rel
    finally:
        handles.close()


def read_text_file(root: str, path: str) -> bytes:
    """The content of a file under the root, opened without following links."""
    rel = relative_path(root, path)
    handles = DirHandles(root)
    try:
        fd, name = _parent_fd(handles, rel, create=False)
        src = os.open(name, _READ_FLAGS, dir_fd=fd)
        try:
            parts = []
            while piece := os.read(src, 1 << 20):
                parts.append(piece)
            return b"".join(parts)
        finally:
            os.close(src)
    except UnsafePath:
        raise
    finally:
        handles.close()
