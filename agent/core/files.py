"""Reading and writing files for the agent's tools: inside the root, never in ``.git``.

Paths are root-relative after ``relative_path``. ``resolve`` follows a
symlink only to a target inside the root, and never into a ``.git`` or
earshot's data directory, so a call reads or writes what the link names.
``write_text_file`` refuses any path with a ``.git`` component (the user's
repository is never written) or under the data directory. Every parent is
then opened with O_NOFOLLOW from the root down (``DirHandles``): a link put
in place after resolving is refused, not followed. Missing parents are
created, and a file is written to a temp file and renamed into place.

Only regular files are read or replaced. A FIFO is opened with O_NONBLOCK
and refused after ``fstat``, so a call never blocks on one; a socket, a
device or a directory is refused the same way.

``.git`` is matched exactly: Linux filesystems are case-sensitive, so
``.GIT`` is another name there (only a case-insensitive mount would make
it an alias, which earshot does not try to detect).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Collection
from dataclasses import replace
from pathlib import PurePosixPath

from earshot.agent.core.calls import Bash, Call, ReadFile
from earshot.cas import faults
from earshot.cas.dirfd import DirHandles, UnsafePath
from earshot.cas.errors import EarshotError
from earshot.cas.recording import MAX_DEPTH, TEMP_PREFIX
from earshot.cas.restage import PathOutsideRoot, relative_path

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: Symlinks followed in one path at most, as the kernel's lookup allows (ELOOP).
MAX_LINKS = 40


class TooDeep(EarshotError):
    """A write deeper than earshot records a tree: undo could not take it back."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path[:60]}...: more than {MAX_DEPTH} directories deep; earshot records "
            f"{MAX_DEPTH} levels, so this write is refused"
        )
        self.path = path


class BadPath(EarshotError):
    """A path or command no system call can take (a NUL byte in it)."""

    def __init__(self, what: str, text: str) -> None:
        super().__init__(f"{what} {text!r} contains a NUL byte")
        self.text = text


class ProtectedPath(EarshotError):
    """A path in a ``.git`` directory or in earshot's data directory: never written."""

    def __init__(self, path: str, where: str) -> None:
        why = (
            "earshot never writes the user's git repository (use git for that)"
            if where == ".git"
            else "earshot's own data is not written by the agent's tools"
        )
        super().__init__(f"{path}: inside {where}; {why}")
        self.path = path


class LinkNotFollowed(EarshotError):
    """A symlink whose target lies outside the root, or in ``.git`` or the data directory."""

    def __init__(self, link: str, target: str, where: str) -> None:
        super().__init__(f"{link}: a symlink to {target!r}, {where}; not followed")
        self.path = link


class NotRegularFile(EarshotError):
    """A FIFO, socket, device or directory where a regular file is wanted."""

    def __init__(self, path: str, kind: str, action: str) -> None:
        super().__init__(f"{path}: {kind}, not a regular file; not {action}")
        self.path = path


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "a special file"


def _check_text(what: str, text: str) -> None:
    if "\0" in text:
        raise BadPath(what, text)


def _in_git(parts: Collection[str]) -> bool:
    return ".git" in parts


def _in_data_dir(root: str, rel: str, protected: Collection[str]) -> bool:
    full = f"{root}/{rel}"
    return any(full == d or full.startswith(d + "/") for d in protected)


def resolve(root: str, path: str, protected: Collection[str] = ()) -> str:
    """The root-relative path ``path`` names once in-root symlinks are followed.

    A link is followed only to a target inside the root, outside any ``.git``
    and outside the ``protected`` directories (absolute paths: earshot's data
    directory when it lies in the root); any other link is refused
    (``LinkNotFollowed``). The path need not exist: resolving stops at the
    first missing component and keeps the rest as given.
    """
    _check_text("the path", path)
    rel = relative_path(root, path)
    pending = rel.split("/")
    pending.reverse()  # a stack: the next component is last
    done: list[str] = []
    followed: tuple[str, str] | None = None  # the last link followed, and its target
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if not done:
                assert followed is not None  # ``relative_path`` refuses ".." itself
                raise LinkNotFollowed(*followed, "outside the root")
            done.pop()
            continue
        here = "/".join((*done, name))
        try:
            st = os.lstat(f"{root}/{here}")
        except (FileNotFoundError, NotADirectoryError):
            rest = [p for p in reversed(pending) if p not in ("", ".")]
            if ".." in rest:  # under a missing directory: nothing to go back up from
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), here) from None
            done += [name, *rest]
            break
        if not stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
        target = os.readlink(f"{root}/{here}")
        _check_text("the link target", target)
        followed = (here, target)
        pure = PurePosixPath(target)
        if pure.is_absolute():
            try:
                pure = pure.relative_to(root)
            except ValueError:
                raise LinkNotFollowed(here, target, "outside the root") from None
            done = []
        pending.extend(reversed(pure.parts))
    if not done:
        raise PathOutsideRoot(path)
    resolved = "/".join(done)
    if followed is not None:
        if _in_git(done):
            raise LinkNotFollowed(*followed, "into .git")
        if _in_data_dir(root, resolved, protected):
            raise LinkNotFollowed(*followed, "into earshot's data directory")
    return resolved


def check_writable(root: str, rel: str, protected: Collection[str] = ()) -> None:
    """Refuse a root-relative path in any ``.git`` or in a ``protected`` directory."""
    if _in_git(rel.split("/")):
        raise ProtectedPath(rel, ".git")
    if _in_data_dir(root, rel, protected):
        raise ProtectedPath(rel, "earshot's data directory")


def prepare_call(root: str, call: Call, protected: Collection[str] = ()) -> Call:
    """The call with its path resolved (links followed) and checked; raises if refused.

    The engine restages and ledgers the path a call really writes: the
    target of an in-root link, not the link.
    """
    if isinstance(call, Bash):
        _check_text("the command", call.command)
        return call
    if call.path.endswith("/"):  # else "x/" would write a file named "x"
        raise IsADirectoryError(errno.EISDIR, "a path ending in / names a directory", call.path)
    rel = resolve(root, call.path, protected)
    if not isinstance(call, ReadFile):
        if rel.count("/") >= MAX_DEPTH:
            raise TooDeep(rel)
        check_writable(root, rel, protected)
    return replace(call, path=rel)


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


def write_text_file(
    root: str,
    path: str,
    data: bytes,
    protected: Collection[str] = (),
    temp_tag: str | None = None,
) -> str:
    """Write ``data`` at ``path`` atomically; return the root-relative path written.

    An in-root symlink is followed to its target (``resolve``). An existing
    file keeps its permission bits; a new one gets the umask's. Refuses
    (UnsafePath) a parent that became a symlink or is a file, a target that
    is not a regular file, and any path in ``.git`` or under ``protected``.
    The temp file is named after ``temp_tag`` (the batch's intent): if this
    process dies before the rename, the command that finishes the batch
    removes it.
    """
    rel = resolve(root, path, protected)
    check_writable(root, rel, protected)
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
            if stat.S_ISLNK(st.st_mode):  # put there since ``resolve`` looked
                raise UnsafePath(rel)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(rel, _kind(st.st_mode), "replaced")
            mode = stat.S_IMODE(st.st_mode)
        _write_via_temp(fd, name, rel, data, mode, temp_tag or f"w{os.getpid()}")
        return rel
    finally:
        handles.close()


def _write_via_temp(
    fd: int, name: bytes, rel: str, data: bytes, mode: int | None, tag: str
) -> None:
    """Temp file in the same directory, then rename; an error names ``rel``, not the temp."""
    temp = os.fsencode(f"{TEMP_PREFIX}{tag}-{os.urandom(4).hex()}")
    try:
        out = os.open(temp, _WRITE_FLAGS, 0o666, dir_fd=fd)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, rel) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
        if mode is not None:
            os.fchmod(out, mode)
        os.close(out)
        out = -1
        faults.point("write-rename")
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError as exc:
        _discard(fd, temp, out)
        raise type(exc)(exc.errno, exc.strerror, rel) from None
    except BaseException:
        _discard(fd, temp, out)
        raise


def _discard(fd: int, temp: bytes, out: int) -> None:
    if out >= 0:
        os.close(out)
    with contextlib.suppress(OSError):
        os.unlink(temp, dir_fd=fd)


def read_text_file(root: str, path: str, protected: Collection[str] = ()) -> bytes:
    """The content of a regular file under the root; in-root symlinks are followed.

    Anything else (a FIFO, socket, device, directory) is refused at once
    (``NotRegularFile``), never waited on.
    """
    rel = resolve(root, path, protected)
    handles = DirHandles(root)
    try:
        fd, name = _parent_fd(handles, rel, create=False)
        try:
            src = os.open(name, _READ_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket: open() never works on one
                raise NotRegularFile(rel, "a socket", "read") from None
            if exc.errno == errno.ELOOP:  # a link put there since ``resolve`` looked
                raise UnsafePath(rel) from None
            raise type(exc)(exc.errno, exc.strerror, rel) from None
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(rel, _kind(st.st_mode), "read")
            parts = []
            while piece := os.read(src, 1 << 20):
                parts.append(piece)
            return b"".join(parts)
        finally:
            os.close(src)
    finally:
        handles.close()
