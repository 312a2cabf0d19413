"""Applying a restore plan under a root, never outside it.

Applying works through directory descriptors opened one component at a
time with O_NOFOLLOW (``dirfd``), so no write can pass through a symlink or
leave the root, even if the tree changes meanwhile. Each file is written to
a temp file in its directory and renamed over its name: a hard link is
replaced, not written through, and no file is ever left half-written.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import blake3

from . import faults
from .digest import Digest, blob_digest
from .dirfd import DirHandles, UnsafePath
from .objects import CorruptObject, ObjectReader
from .progress import QUIET, Progress
from .recording import TEMP_PREFIX
from .restore import RestorePlan
from .tree import Ident, Kind, TreeEntry

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Why a directory stays: it holds what the plan does not remove.
DIR_NOT_EMPTY = "directory not empty; kept"
#: Why a file is not written: a directory (that stayed) is in its place.
DIR_IN_THE_WAY = "a directory is in the way; kept"
#: renameat2's flag: fail with EEXIST rather than replace the destination.
_RENAME_NOREPLACE = 1
#: Why a write or a delete did not happen: the path changed after the plan.
CHANGED_SINCE_PLANNED = "changed since it was planned; kept"
#: Files written to temp names before they are made durable and renamed in
#: together (one syncfs): bounds the temp files and the extra space at once.
STAGED_FILES = 1000
STAGED_BYTES = 64 << 20
_renameat2: Callable[..., int] | None = None
_syncfs: Callable[[int], int] | None = None


def rename_noreplace(from_fd: int, from_name: bytes, to_fd: int, to_name: bytes) -> None:
    """Rename, relative to directory descriptors, never replacing what is at the destination.

    ``renameat2(RENAME_NOREPLACE)`` makes the check and the rename one step;
    where the C library or the file system lacks it, the destination is
    checked first (a window of microseconds).
    """
    global _renameat2
    if _renameat2 is None:
        libc = ctypes.CDLL(None, use_errno=True)
        function = getattr(libc, "renameat2", None)
        _renameat2 = function if function is not None else _no_renameat2
    if _renameat2 is not _no_renameat2:
        if _renameat2(from_fd, from_name, to_fd, to_name, _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(code, os.strerror(code), os.fsdecode(to_name))
    try:
        os.lstat(to_name, dir_fd=to_fd)
    except FileNotFoundError:
        os.rename(from_name, to_name, src_dir_fd=from_fd, dst_dir_fd=to_fd)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(to_name))


def _no_renameat2(*_args: object) -> int:
    return -1


def sync_file_system(fd: int) -> None:
    """Make durable everything written to the file system holding ``fd`` (``syncfs``).

    One call, where an fsync per file would cost a disk flush each; where
    the C library lacks it, ``sync`` (every file system) does the same.
    """
    global _syncfs
    if _syncfs is None:
        _syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None) or _no_syncfs
    if _syncfs(fd) != 0:
        os.sync()


def _no_syncfs(_fd: int) -> int:
    return -1


def sync_file_system_at(path: str) -> None:
    """``sync_file_system`` of the file system holding the directory ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sync_file_system(fd)
    finally:
        os.close(fd)


@dataclass(slots=True)
class RestoreResult:
    """What applying did; ``skipped`` adds what changed between plan and apply."""

    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: (from, to) of what was moved back by a rename.
    moved: list[tuple[str, str]] = field(default_factory=list)


def _lstat(handles: DirHandles, rel: str) -> os.stat_result | None:
    fd, name = handles.parent(rel)
    try:
        return os.lstat(name, dir_fd=fd)
    except FileNotFoundError:
        return None


def _disk_digest(handles: DirHandles, rel: str, kind: Kind) -> Digest | None:
    """The digest of what is on disk now at ``rel``, if it is a file or link."""
    fd, name = handles.parent(rel)
    try:
        if kind is Kind.SYMLINK:
            return blob_digest(os.readlink(name, dir_fd=fd))
        file_fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
        )
    except OSError:
        return None
    try:
        hasher = blake3.blake3()
        while piece := os.read(file_fd, 1 << 20):
            hasher.update(piece)
        return Digest(hasher.digest())
    finally:
        os.close(file_fd)


def still_is(handles: DirHandles, rel: str, entry: TreeEntry) -> bool:
    """Is the path on disk still what the plan saw (kind and content)?"""
    st = _lstat(handles, rel)
    if st is None:
        return False
    if entry.kind is Kind.FILE:
        return stat.S_ISREG(st.st_mode) and _disk_digest(handles, rel, Kind.FILE) == entry.digest
    if entry.kind is Kind.SYMLINK:
        return stat.S_ISLNK(st.st_mode) and _disk_digest(handles, rel, Kind.SYMLINK) == entry.digest
    return stat.S_ISDIR(st.st_mode) if entry.kind is Kind.DIR else False


def verify_plan(reader: ObjectReader, plan: RestorePlan) -> None:
    """Check every object the plan will write before touching the tree.

    A corrupt store must leave the tree as it was: one bad blob found
    halfway through would leave a half-restored root.
    """
    for _path, entry in plan.writes:
        assert entry.digest is not None
        reader.verify(entry.digest)


#: Runs of zeros covering whole blocks of this size (at file offsets that are
#: multiples of it) are skipped over, not written: they read back as zeros and
#: take no space, so a sparse file is restored sparse (4 KiB: the block size of
#: ext4, xfs and btrfs; a smaller block size only leaves some zeros written).
HOLE_BLOCK = 4096
_ZERO_BLOCK = bytes(HOLE_BLOCK)


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def write_sparse(fd: int, piece: bytes, offset: int) -> None:
    """Write ``piece`` at ``offset`` of a new file, leaving its zero blocks as holes.

    The caller sets the file's size at the end (``ftruncate``): a hole at the
    end writes nothing. As ``cp --sparse=always``: a file that had zeros
    written out is restored with holes there, the same bytes in less space.
    """
    size = len(piece)
    if size < HOLE_BLOCK or _ZERO_BLOCK not in piece:  # the common case, one C search
        _pwrite_all(fd, piece, offset)
        return
    view = memoryview(piece)
    pending = 0  # start of the data not written yet
    pos = -offset % HOLE_BLOCK  # the first block boundary inside the piece
    while pos + HOLE_BLOCK <= size:
        found = piece.find(_ZERO_BLOCK, pos)
        if found < 0:
            break
        # No block boundary between pos and found starts a zero block (find
        # would have stopped there), so the first candidate is found rounded up.
        start = found + (-(offset + found) % HOLE_BLOCK)
        if start + HOLE_BLOCK > size:
            break
        if not piece.startswith(_ZERO_BLOCK, start):
            pos = start + HOLE_BLOCK
            continue
        end = start + HOLE_BLOCK
        while end + HOLE_BLOCK <= size and piece.startswith(_ZERO_BLOCK, end):
            end += HOLE_BLOCK
        if pending < start:
            _pwrite_all(fd, view[pending:start], offset + pending)
        pending = pos = end
    if pending < size:
        _pwrite_all(fd, view[pending:], offset + pending)


class Applier:
    """Carries out a plan under one root."""

    def __init__(
        self, root: str, reader: ObjectReader, temp_tag: str, progress: Progress = QUIET
    ) -> None:
        self.reader = reader
        self.progress = progress
        self.handles = DirHandles(root)
        self.temp_prefix = os.fsencode(f"{TEMP_PREFIX}{temp_tag}-")
        self.result = RestoreResult()
        self._counter = 0
        #: Written to temp names beside their paths, not yet renamed in: (path, temp).
        self._staged: list[tuple[str, bytes]] = []
        self._staged_bytes = 0

    def verify(self, plan: RestorePlan) -> None:
        verify_plan(self.reader, plan)

    def apply(
        self, plan: RestorePlan, verified: bool = False, label: str = "restoring"
    ) -> RestoreResult:
        """Carry the plan out; ``verified``: the caller ran ``verify`` already.
        ``label``: what the progress calls it (the steps counted, the bytes written)."""
        if not verified:
            self.verify(plan)
        steps = len(plan.deletes) + 2 * len(plan.mkdirs) + len(plan.renames) + len(plan.rmdirs)
        steps += len(plan.writes) + len(plan.chmods)
        size = sum(e.size for _, e in plan.writes if e.kind is Kind.FILE)
        self.progress.stage(label, total=steps, total_bytes=size)
        # Renames need the directories they go into (made first) and must
        # empty the directories they come from before those are removed.
        try:
            for path, entry in plan.deletes:
                self._guard(path, self._delete, path, entry)
            for path, entry in sorted(plan.mkdirs, key=lambda pe: pe[0].count("/")):
                self._guard(path, self._mkdir, path, entry)
            for source, path, ident in plan.renames:
                self._guard(path, self._rename, source, path, ident)
            for path in sorted(plan.rmdirs, key=lambda p: -p.count("/")):
                self._guard(path, self._rmdir, path)
            for path, entry in plan.writes:
                self._guard(path, self._write, path, entry, plan)
                if len(self._staged) >= STAGED_FILES or self._staged_bytes >= STAGED_BYTES:
                    self._place_staged(plan)
            self._place_staged(plan)
            file_modes = [(p, e) for p, e in plan.chmods if e.kind is not Kind.DIR]
            dir_modes = [(p, e) for p, e in plan.chmods if e.kind is Kind.DIR]
            dir_modes += [(p, e) for p, e in plan.mkdirs]
            for path, entry in file_modes:
                self._guard(path, self._chmod, path, entry)
            # Directories last and deepest first: a read-only directory must not
            # lock out the writes below it.
            for path, entry in sorted(dir_modes, key=lambda pe: -pe[0].count("/")):
                self._guard(path, self._chmod, path, entry)
            if steps:
                # Durable before the caller commits the operation's end: a
                # power cut must not find it ended over bytes and names that
                # never reached the disk (an undo said done, its files empty).
                sync_file_system(self.handles.root_fd)
        finally:
            for path, temp in self._staged:  # cut short by an error: none goes in
                with contextlib.suppress(OSError, UnsafePath):
                    os.unlink(temp, dir_fd=self.handles.parent(path)[0])
            self._staged.clear()
            self.handles.close()
        return self.result

    def _guard(self, path: str, action: Callable[..., None], *args: object) -> None:
        try:
            action(*args)
        except UnsafePath as exc:
            self.result.skipped.append((path, str(exc).split(": ", 1)[1]))
        except OSError as exc:
            self.result.skipped.append((path, exc.strerror or str(exc)))
        # One step of the plan, whatever its outcome; a write counts its bytes.
        written = args[1] if action == self._write else None
        size = written.size if isinstance(written, TreeEntry) and written.kind is Kind.FILE else 0
        self.progress.advance(1, size)

    def _delete(self, path: str, entry: TreeEntry) -> None:
        if not still_is(self.handles, path, entry):
            self.result.skipped.append((path, CHANGED_SINCE_PLANNED))
            return
        fd, name = self.handles.parent(path)
        faults.point("restore-delete")
        os.unlink(name, dir_fd=fd)
        self.result.deleted.append(path)

    def _rename(self, source: str, path: str, ident: Ident) -> None:
        """Move ``source`` back to ``path``: only the same inode, never over anything."""
        st = _lstat(self.handles, source)
        same = (
            st is not None and st.st_ino == ident.ino and stat.S_ISDIR(st.st_mode) == ident.is_dir
        )
        if st is None or not same or (not ident.is_dir and st.st_mtime_ns != ident.mtime_ns):
            self.result.skipped.append((path, f"{source} changed since it was planned; kept"))
            return
        from_fd, from_name = self.handles.parent(source)
        to_fd, to_name = self.handles.parent(path)
        if ident.is_dir:
            self.handles.forget(source)
        faults.point("restore-rename-back")
        try:
            rename_noreplace(from_fd, from_name, to_fd, to_name)
        except FileExistsError:
            self.result.skipped.append((path, "something is there now; kept where it is"))
            return
        self.result.moved.append((source, path))

    def _rmdir(self, path: str) -> None:
        fd, name = self.handles.parent(path)
        self.handles.forget(path)
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                self.result.skipped.append((path, DIR_NOT_EMPTY))
                return
            raise
        self.result.removed_dirs.append(path)

    def _mkdir(self, path: str, entry: TreeEntry) -> None:
        fd, name = self.handles.parent(path)
        st = _lstat(self.handles, path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            # The delete step removes a file planned to be replaced; if it is
            # still here, it changed since planning and was kept.
            self.result.skipped.append((path, "a file is in the way of a directory; kept"))
            return
        if st is not None:
            return
        os.mkdir(name, 0o700, dir_fd=fd)
        if entry.mode & 0o700 == 0o700:
            # Its final mode at once (umask aside) when that leaves it writable:
            # a restore cut off before the last step leaves it right anyway.
            os.chmod(name, entry.mode, dir_fd=fd, follow_symlinks=False)
        self.result.created_dirs.append(path)

    def _temp_name(self) -> bytes:
        self._counter += 1
        return self.temp_prefix + str(self._counter).encode()

    def _still_replaces(self, path: str, plan: RestorePlan) -> bool:
        """Is what the write would replace still what the plan saw (if it said)?"""
        if path not in plan.replaces:
            return True
        replaces = plan.replaces[path]
        if replaces is None or replaces.kind is Kind.DIR:  # a directory: removed by now
            return _lstat(self.handles, path) is None
        return still_is(self.handles, path, replaces)

    def _write(self, path: str, entry: TreeEntry, plan: RestorePlan) -> None:
        assert entry.digest is not None
        fd, _ = self.handles.parent(path)
        current = _lstat(self.handles, path)
        if current is not None and stat.S_ISDIR(current.st_mode):
            self.result.skipped.append((path, DIR_IN_THE_WAY))
            return
        temp = self._temp_name()
        try:
            if entry.kind is Kind.SYMLINK:
                target = self.reader.read_blob(entry.digest)
                if blob_digest(target) != entry.digest:
                    raise CorruptObject(entry.digest, "content does not match its digest")
                os.symlink(target, temp, dir_fd=fd)
            else:
                self._write_file(fd, temp, entry)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=fd)
            raise
        self._staged.append((path, temp))
        self._staged_bytes += entry.size if entry.kind is Kind.FILE else 0

    def _place_staged(self, plan: RestorePlan) -> None:
        """Rename the staged files in, once their bytes are durable.

        Without the sync first, a power cut could keep a rename and lose the
        bytes it names: a file emptied that is neither what it was nor what
        the plan wrote, which no rerun could tell from a person's edit. One
        ``syncfs`` for many files (``STAGED_FILES``, ``STAGED_BYTES``), not
        an fsync each.
        """
        if not self._staged:
            return
        sync_file_system(self.handles.root_fd)
        staged, self._staged, self._staged_bytes = self._staged, [], 0
        for i, (path, temp) in enumerate(staged):
            try:
                self._place(path, temp, plan)
            except UnsafePath as exc:
                self.result.skipped.append((path, str(exc).split(": ", 1)[1]))
            except OSError as exc:
                self.result.skipped.append((path, exc.strerror or str(exc)))
            except BaseException:
                self._staged = staged[i + 1 :]  # removed by apply's cleanup
                raise

    def _place(self, path: str, temp: bytes, plan: RestorePlan) -> None:
        fd, name = self.handles.parent(path)
        try:
            faults.point("restore-rename")
            # Checked just before the rename, as a delete is: an edit made
            # since the plan (while the undo was applying) is never overwritten.
            if not self._still_replaces(path, plan):
                os.unlink(temp, dir_fd=fd)
                self.result.skipped.append((path, CHANGED_SINCE_PLANNED))
                return
            os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=fd)
            raise
        self.result.written.append(path)

    def _write_file(self, dir_fd: int, temp: bytes, entry: TreeEntry) -> None:
        assert entry.digest is not None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(temp, flags, 0o600, dir_fd=dir_fd)
        hasher = blake3.blake3()
        offset = 0
        try:
            for piece in self.reader.iter_blob(entry.digest):
                hasher.update(piece)
                write_sparse(out, piece, offset)
                offset += len(piece)
            os.ftruncate(out, offset)  # a trailing hole sets the size
            os.fchmod(out, entry.mode)
        finally:
            os.close(out)
        if hasher.digest() != entry.digest:
            # Verified a moment ago; changed since. Never rename wrong bytes in.
            raise CorruptObject(entry.digest, "content does not match its digest")

    def _chmod(self, path: str, entry: TreeEntry) -> None:
        fd, name = self.handles.parent(path)
        st = os.lstat(name, dir_fd=fd)
        if stat.S_ISLNK(st.st_mode):
            return  # link modes are not settable on Linux, nor meaningful
        flags = _READ_FLAGS
        if stat.S_ISDIR(st.st_mode):
            flags |= os.O_DIRECTORY
        try:
            target = os.open(name, flags, dir_fd=fd)
        except PermissionError:
            os.chmod(name, entry.mode, dir_fd=fd)  # unreadable: chmod by name (checked not a link)
        else:
            try:
                os.fchmod(target, entry.mode)
            finally:
                os.close(target)
        if path not in self.result.written:
            self.result.modes.append(path)


def remove_temp_files(root: str, rel_dirs: Iterator[str] | list[str], temp_tag: str) -> int:
    """Remove the temp files an interrupted restore with ``temp_tag`` left behind."""
    prefix = os.fsencode(f"{TEMP_PREFIX}{temp_tag}-")
    handles = DirHandles(root)
    removed = 0
    try:
        for rel in set(rel_dirs):
            try:
                fd = handles.dir_fd(rel)
                names = [n for n in os.listdir(fd) if os.fsencode(n).startswith(prefix)]
                for name in names:
                    os.unlink(name, dir_fd=fd)
                    removed += 1
            except (OSError, UnsafePath):
                continue
    finally:
        handles.close()
    return removed
