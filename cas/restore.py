"""Restoring a root to a tree: plan first, then apply, never outside the root.

The plan compares the current state (a fresh scan, stored like any snapshot,
so a restore can itself be reverted) with the target, and sorts every
difference into writes, directory creations, deletions, mode changes and
skips. Extra paths on disk are deleted only when the caller's ``may_delete``
rule says so (the ledger, for undo; ``--force`` for a bare restore); by
default they are kept and reported. Whatever the rule, an extra path the
target state ignores is kept (its own ``.gitignore``/``.earshotignore``
files, as recorded, and ``.git/info/exclude`` as on disk): ``git reset
--hard`` then ``git clean`` would keep it too. Unrecorded entries (too
large, unreadable, special) are never written, overwritten or deleted.

Applying works through directory file descriptors opened one component at a
time with O_NOFOLLOW, so no write can pass through a symlink or leave the
root, even if the tree changes meanwhile. Each file is written to a temp file
in its directory and renamed over its name: a hard link is replaced, not
written through, and no file is ever left half-written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import blake3

from . import faults
from .digest import Digest, blob_digest
from .errors import EarshotError
from .ignore import LEVEL_FILES, IgnoreRules
from .objects import CorruptObject, ObjectReader
from .scan import TEMP_PREFIX
from .tree import Kind, TreeEntry, Unrecorded

DeleteRule = Callable[[str, TreeEntry], bool]

_UNRECORDED = "too large, unreadable, special or too deep"
_WHY = {
    Unrecorded.TOO_LARGE: "too large",
    Unrecorded.TOO_DEEP: "too deep to record",
    Unrecorded.UNREADABLE: "unreadable",
    Unrecorded.SPECIAL: "a special file or file system",
}


def keep_everything(path: str, entry: TreeEntry) -> bool:
    """The default rule: delete nothing that is not proven."""
    return False


def delete_everything(path: str, entry: TreeEntry) -> bool:
    """``--force``: mirror the target exactly."""
    return True


class UnsafePath(EarshotError):
    """A path whose parent on disk is a symlink or not a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: a parent is a symlink or not a directory; not written through")
        self.path = path


@dataclass(slots=True)
class RestorePlan:
    """What applying would do; ``skipped`` holds (path, reason) for what it won't."""

    writes: list[tuple[str, TreeEntry]] = field(default_factory=list)
    mkdirs: list[tuple[str, TreeEntry]] = field(default_factory=list)
    deletes: list[tuple[str, TreeEntry]] = field(default_factory=list)
    rmdirs: list[str] = field(default_factory=list)
    chmods: list[tuple[str, TreeEntry]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.writes or self.mkdirs or self.deletes or self.rmdirs or self.chmods)


IGNORED_BY_TARGET = "ignored by the snapshot's rules; kept"


class _Planner:
    def __init__(self, reader: ObjectReader, may_delete: DeleteRule, root: str | None) -> None:
        self.reader = reader
        self.may_delete = may_delete
        self.root = root
        self.plan = RestorePlan()

    def children(self, digest: Digest | None) -> dict[bytes, TreeEntry]:
        if digest is None:
            return {}
        return {e.name: e for e in self.reader.read_tree(digest)}

    def ignore_files(self, target: Digest | None) -> list[tuple[str, bytes | None]]:
        """The target directory's ignore files as recorded (None: it has none)."""
        entries = self.children(target)
        found: list[tuple[str, bytes | None]] = []
        for name in LEVEL_FILES:
            entry = entries.get(name.encode())
            data = None  # a symlink is not followed, as git does not (2.32+)
            if entry is not None and entry.kind is Kind.FILE and entry.digest is not None:
                data = self.reader.read_blob(entry.digest)
            found.append((name, data))
        return found

    def inner(self, path: str, rules: IgnoreRules, target: Digest | None) -> IgnoreRules:
        """The target's rules inside directory ``path`` (``target``: its recorded tree)."""
        if rules.is_ignored(path, True):
            rules = rules.below_ignored()  # kept in the target for what git tracked there
        where = os.path.join(self.root, path) if self.root is not None else None
        return rules.descend_with(path, self.ignore_files(target), where)

    def tree(
        self, prefix: str, current: Digest | None, target: Digest | None, rules: IgnoreRules
    ) -> bool:
        """Plan one directory's content; True if everything extra in it goes.

        ``rules``: the target state's ignore rules for this directory's entries.
        """
        if current == target:
            return True
        now = self.children(current)
        want = self.children(target)
        clean = True
        for name in sorted(now.keys() | want.keys()):
            path = prefix + name.decode("utf-8", "surrogateescape")
            clean &= self.entry(path, now.get(name), want.get(name), rules)
        return clean

    def extra(self, path: str, cur: TreeEntry, rules: IgnoreRules) -> bool:
        """A path on disk the target lacks: delete it only if the rule allows.

        Never one the target's rules ignore: that state would not have had it
        recorded, so it says nothing about it.
        """
        if cur.kind is Kind.UNRECORDED:
            self.plan.skipped.append((path, f"not recorded ({_UNRECORDED}); kept"))
            return False
        if rules.is_ignored(path, cur.kind is Kind.DIR):
            self.plan.skipped.append((path, IGNORED_BY_TARGET))
            return False
        if cur.kind is Kind.DIR:
            if self.tree(path + "/", cur.digest, None, self.inner(path, rules, None)):
                self.plan.rmdirs.append(path)
                return True
            return False
        if self.may_delete(path, cur):
            self.plan.deletes.append((path, cur))
            return True
        self.plan.skipped.append((path, "not in the snapshot and not proven safe to delete; kept"))
        return False

    def entry(
        self, path: str, cur: TreeEntry | None, tgt: TreeEntry | None, rules: IgnoreRules
    ) -> bool:
        plan = self.plan
        if tgt is None:
            return self.extra(path, cur, rules) if cur is not None else True
        if tgt.kind is Kind.UNRECORDED:
            if cur is None:
                plan.skipped.append((path, "its content was not recorded; cannot restore it"))
            return True
        if cur is not None and cur.kind is Kind.UNRECORDED:
            why = _WHY[cur.reason] if cur.reason is not None else "not recorded"
            plan.skipped.append((path, f"not recorded on disk ({why}); left alone"))
            return True
        if tgt.kind is Kind.DIR:
            if cur is None or cur.kind is not Kind.DIR:
                # A file or link in the way is overwritten (its content is in the
                # pre-restore snapshot); the new directory is built from nothing.
                plan.mkdirs.append((path, tgt))
                self.tree(path + "/", None, tgt.digest, rules)  # nothing extra to judge
                if cur is not None:
                    plan.deletes.append((path, cur))
                return True
            if cur.digest != tgt.digest:  # an equal subtree costs nothing, not even its rules
                self.tree(path + "/", cur.digest, tgt.digest, self.inner(path, rules, tgt.digest))
            if cur.mode != tgt.mode:
                plan.chmods.append((path, tgt))
            return True
        # The target is a file or a symlink.
        if cur is not None and cur.kind is Kind.DIR:
            if not self.extra(path, cur, rules):
                plan.skipped.append((path, "a directory with kept content is in the way"))
                return False
            plan.writes.append((path, tgt))
            return True
        if cur is None or cur.kind is not tgt.kind or cur.digest != tgt.digest:
            plan.writes.append((path, tgt))
        elif cur.mode != tgt.mode:
            plan.chmods.append((path, tgt))
        return True


def plan_restore(
    reader: ObjectReader,
    current: Digest | None,
    target: Digest,
    may_delete: DeleteRule = keep_everything,
    root: str | None = None,
) -> RestorePlan:
    """Plan the restore of ``target`` over the tree now on disk (``current``).

    ``root``: where the tree lies on disk, for what is never recorded
    (``.git/info/exclude``, nested repositories' ``.git``); without it,
    only the target's recorded ignore files judge its extra paths.
    """
    planner = _Planner(reader, may_delete, root)
    rules = IgnoreRules.for_recorded_root(root, planner.ignore_files(target))
    planner.tree("", current, target, rules)
    return planner.plan


# -- applying -----------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


#: Levels of directories whose descriptors ``DirHandles`` keeps open.
_KEPT_DEPTH = 32


class DirHandles:
    """Directory descriptors under the root, opened one component at a time."""

    def __init__(self, root: str) -> None:
        self.root_fd = os.open(root, _DIR_FLAGS)
        self._open: dict[str, int] = {"": self.root_fd}

    def dir_fd(self, rel_dir: str) -> int:
        """The directory's descriptor, each component opened without following links.

        A loop, not a recursion: a path may hold a thousand components. The
        descriptors of the first ``_KEPT_DEPTH`` levels are kept for the
        next call; deeper ones only while they are walked through, so a deep
        path cannot spend the process's descriptors.
        """
        fd = self._open.get(rel_dir)
        if fd is not None:
            return fd
        parts = rel_dir.split("/")
        known = len(parts) - 1
        while known > 0 and "/".join(parts[:known]) not in self._open:
            known -= 1
        fd = self._open["/".join(parts[:known])] if known else self.root_fd
        passing: list[int] = []
        try:
            for depth in range(known, len(parts)):
                try:
                    fd = os.open(os.fsencode(parts[depth]), _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafePath(rel_dir) from None
                    raise
                if depth < _KEPT_DEPTH or depth == len(parts) - 1:
                    self._open["/".join(parts[: depth + 1])] = fd
                else:
                    passing.append(fd)
        finally:
            for transient in passing:
                os.close(transient)
        return fd

    def parent(self, rel: str) -> tuple[int, bytes]:
        """(descriptor of the directory holding ``rel``, its last component)."""
        parent, _, name = rel.rpartition("/")
        return self.dir_fd(parent), os.fsencode(name)

    def forget(self, rel_dir: str) -> None:
        """Close descriptors of a removed directory and everything under it."""
        for key in [k for k in self._open if k == rel_dir or k.startswith(rel_dir + "/")]:
            if key:
                os.close(self._open.pop(key))

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


@dataclass(slots=True)
class RestoreResult:
    """What applying did; ``skipped`` adds what changed between plan and apply."""

    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


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

    def __init__(self, root: str, reader: ObjectReader, temp_tag: str) -> None:
        self.reader = reader
        self.handles = DirHandles(root)
        self.temp_prefix = os.fsencode(f"{TEMP_PREFIX}{temp_tag}-")
        self.result = RestoreResult()
        self._counter = 0

    def verify(self, plan: RestorePlan) -> None:
        verify_plan(self.reader, plan)

    def apply(self, plan: RestorePlan, verified: bool = False) -> RestoreResult:
        """Carry the plan out; ``verified``: the caller ran ``verify`` already."""
        if not verified:
            self.verify(plan)
        try:
            for path, entry in plan.deletes:
                self._guard(path, self._delete, path, entry)
            for path in sorted(plan.rmdirs, key=lambda p: -p.count("/")):
                self._guard(path, self._rmdir, path)
            for path, entry in sorted(plan.mkdirs, key=lambda pe: pe[0].count("/")):
                self._guard(path, self._mkdir, path, entry)
            for path, entry in plan.writes:
                self._guard(path, self._write, path, entry)
            file_modes = [(p, e) for p, e in plan.chmods if e.kind is not Kind.DIR]
            dir_modes = [(p, e) for p, e in plan.chmods if e.kind is Kind.DIR]
            dir_modes += [(p, e) for p, e in plan.mkdirs]
            for path, entry in file_modes:
                self._guard(path, self._chmod, path, entry)
            # Directories last and deepest first: a read-only directory must not
            # lock out the writes below it.
            for path, entry in sorted(dir_modes, key=lambda pe: -pe[0].count("/")):
                self._guard(path, self._chmod, path, entry)
        finally:
            self.handles.close()
        return self.result

    def _guard(self, path: str, action: Callable[..., None], *args: object) -> None:
        try:
            action(*args)
        except UnsafePath as exc:
            self.result.skipped.append((path, str(exc).split(": ", 1)[1]))
        except OSError as exc:
            self.result.skipped.append((path, exc.strerror or str(exc)))

    def _delete(self, path: str, entry: TreeEntry) -> None:
        if not still_is(self.handles, path, entry):
            self.result.skipped.append((path, "changed since it was planned; kept"))
            return
        fd, name = self.handles.parent(path)
        faults.point("restore-delete")
        os.unlink(name, dir_fd=fd)
        self.result.deleted.append(path)

    def _rmdir(self, path: str) -> None:
        fd, name = self.handles.parent(path)
        self.handles.forget(path)
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                self.result.skipped.append((path, "directory not empty; kept"))
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

    def _write(self, path: str, entry: TreeEntry) -> None:
        assert entry.digest is not None
        fd, name = self.handles.parent(path)
        current = _lstat(self.handles, path)
        if current is not None and stat.S_ISDIR(current.st_mode):
            self.result.skipped.append((path, "a directory is in the way; kept"))
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
            faults.point("restore-rename")
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
